package gateway_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
)

// TestControlBodyIsBounded: the internal control API reads at most a megabyte of body, and says
// so with 413 rather than reading on.
func TestControlBodyIsBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	certPEM, _, err := e.bundle.IssueInternal("api", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(certPEM)
	leaf, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	h := gateway.New(gateway.Options{Pool: e.pool, Authority: e.bundle, ID: "gw-control"}).ControlHandler(gatewaytest.TrustDomain)
	for _, tc := range []struct {
		name   string
		body   string
		status int
	}{
		{"small", `{"nodeIds": []}`, http.StatusNoContent},
		{"two megabytes", `{"nodeIds": ["` + strings.Repeat("0", 2<<20) + `"]}`, http.StatusRequestEntityTooLarge},
	} {
		req := httptest.NewRequest(http.MethodPost, "/internal/v1/poke", strings.NewReader(tc.body))
		req.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{leaf}}}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.status {
			body, _ := io.ReadAll(rec.Body)
			t.Errorf("%s: %d %s, want %d", tc.name, rec.Code, body, tc.status)
		}
	}
}
