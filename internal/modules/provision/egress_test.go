package provision

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/structpb"

	provisionmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1"
	"github.com/better-compute/better-compute/internal/provision/metal"
	"github.com/better-compute/better-compute/internal/provision/vps"
	"github.com/better-compute/better-compute/internal/release"
)

// leaked is what the internal service of these tests answers: no reason, error or log line
// may carry it.
const leaked = "SECRET-internal-7f3a"

// internalService is a service on loopback, reachable from the control plane only, that
// answers every request with status and a body carrying the secret.
func internalService(t *testing.T, status int, body string) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(s.Close)
	return s.URL
}

func structOf(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// redfishClass and ec2Class are classes whose endpoint is endpoint.
func redfishClass(t *testing.T, name, endpoint string) *provisionmodulev1.CreateClassRequest {
	t.Helper()
	return &provisionmodulev1.CreateClassRequest{
		Name: name, Provider: metal.Kind, Credentials: []byte(`{"username": "u", "password": "p"}`),
		Params: structOf(t, map[string]any{"endpoints": []any{endpoint}, "boot": map[string]any{"mode": "pxe"}, "timeout": "5s"}),
	}
}

func ec2Class(t *testing.T, name, endpoint string) *provisionmodulev1.CreateClassRequest {
	t.Helper()
	pub, _, err := release.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &provisionmodulev1.CreateClassRequest{
		Name: name, Provider: vps.Kind,
		Credentials: []byte(`{"accessKeyId": "AKIAIOSFODNN7EXAMPLE", "secretAccessKey": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"}`),
		Params: structOf(t, map[string]any{
			"region": "us-east-1", "endpoint": endpoint, "imageId": "ami-0123456789abcdef0", "instanceType": "t3.micro",
			"release": map[string]any{"url": "https://releases.example.com/bc", "version": "v1.2.3", "publicKey": pub.String()},
		}),
	}
}

var providersWithEndpoints = Providers{metal.Kind: metal.Factory, vps.Kind: vps.Factory}

// TestPrivateEndpointsRefused: by default, a tenant admin cannot make a class whose provider
// endpoint is a loopback, link-local (the cloud metadata address) or private address: the
// create is refused as invalid_argument naming the endpoint's field.
func TestPrivateEndpointsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, providersWithEndpoints)
	svc := internalService(t, http.StatusOK, leaked)
	for _, endpoint := range []string{svc, "http://169.254.169.254", "http://localhost:8080", "http://[::1]:443", "http://10.1.2.3"} {
		for _, tc := range []struct {
			req   *provisionmodulev1.CreateClassRequest
			field string
		}{
			{redfishClass(t, "bmc", endpoint), "params.endpoints[0]: "},
			{ec2Class(t, "cloud", endpoint), "params.endpoint: "},
		} {
			_, err := e.client.CreateClass(t.Context(), tc.req)
			wantCode(t, err, connect.CodeInvalidArgument, tc.req.GetProvider()+" class on "+endpoint)
			if err != nil && !strings.Contains(err.Error(), "invalid_argument: "+tc.field) {
				t.Errorf("%s class on %s: %v, want the field %q named", tc.req.GetProvider(), endpoint, err, tc.field)
			}
		}
	}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestProviderErrorsAreSummaries: where the deployment allows private endpoints, a class
// pointed at an internal service that fails with a body gets its machines' failures recorded
// as summaries: neither the machine's reason, nor the controller's error (which the workers
// log), nor the controller's log carries the body.
func TestProviderErrorsAreSummaries(t *testing.T) {
	t.Parallel()
	e := newEnv(t, providersWithEndpoints, func(c *Config) { c.AllowPrivateEndpoints = true })
	e.startGateway(t)
	redfish := internalService(t, http.StatusInternalServerError, `{"error": {"message": "`+leaked+`"}}`)
	ec2 := internalService(t, http.StatusBadRequest, `<Response><Errors><Error><Code>AuthFailure</Code><Message>`+leaked+`</Message></Error></Errors></Response>`)
	for _, req := range []*provisionmodulev1.CreateClassRequest{redfishClass(t, "bmc", redfish), ec2Class(t, "cloud", ec2)} {
		if _, err := e.client.CreateClass(t.Context(), req); err != nil {
			t.Fatalf("%s class on loopback, allowed: %v", req.GetProvider(), err)
		}
	}
	var logs syncBuffer
	c := e.controller(t, nil)
	c.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, class := range []string{"bmc", "cloud"} {
		id := e.createMachine(t, class, "m-"+class)
		var errs []string
		for range 3 {
			if err := c.Reconcile(t.Context(), id.String()); err != nil {
				errs = append(errs, err.Error())
			}
		}
		m := e.machine(t, id)
		if m.Reason == "" {
			t.Fatalf("%s: machine %s (%s) has no reason", class, id, m.State)
		}
		t.Logf("%s: machine %s, reason %q", class, m.State, m.Reason)
		for what, text := range map[string]string{"reason": m.Reason, "errors": strings.Join(errs, "\n"), "logs": logs.String()} {
			if strings.Contains(text, leaked) {
				t.Errorf("%s: the %s carry the internal service's answer: %s", class, what, text)
			}
		}
		wantIn := map[string]string{"bmc": "500", "cloud": "AuthFailure"}[class]
		if !strings.Contains(m.Reason, wantIn) {
			t.Errorf("%s: reason %q does not say %q", class, m.Reason, wantIn)
		}
	}
}
