package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/registry"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

func mustRegistry(t testing.TB) *registry.Registry {
	t.Helper()
	r, err := registry.FromGlobal()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestEveryMethodIsGuarded checks the registry the server builds: every method is public or has
// a permission, and every mutating (audited) method requires a credential.
func TestEveryMethodIsGuarded(t *testing.T) {
	t.Parallel()
	for _, m := range mustRegistry(t).Methods() {
		if !m.Public && m.Permission == "" {
			t.Errorf("%s has neither a permission nor public", m.Procedure)
		}
		if m.Audit && m.Public {
			t.Errorf("%s is audited but public", m.Procedure)
		}
	}
}

func TestWellKnownAndCORS(t *testing.T) {
	t.Parallel()
	api, err := server.New(server.Options{
		Pool: dbtest.Pool(t), Secret: servertest.Secret, BaseURL: "https://compute.example.com",
		TrustDomain: "compute.example.com", GatewayEndpoints: []string{"gw.compute.example.com:443"},
		CORS: server.CORSOptions{AllowedOrigins: []string{"https://app.example.com"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := record(api, http.MethodGet, "/.well-known/better-compute", nil)
	var d server.Discovery
	if err := json.Unmarshal(rec.body, &d); err != nil || rec.code != 200 {
		t.Fatalf("well-known: %d %s %v", rec.code, rec.body, err)
	}
	if d.APIBaseURL != "https://compute.example.com/api" || d.TrustDomain != "compute.example.com" || len(d.GatewayEndpoints) != 1 {
		t.Errorf("well-known = %+v", d)
	}
	// A preflight from an allowed origin may send the API's headers; another origin may not.
	preflight := func(origin string) http.Header {
		return record(api, http.MethodOptions, "/api/iam/whoAmI", http.Header{
			"Origin":                         {origin},
			"Access-Control-Request-Method":  {"POST"},
			"Access-Control-Request-Headers": {"authorization,connect-protocol-version,content-type,x-better-compute"}, // sorted, as browsers send it
		}).header
	}
	h := preflight("https://app.example.com")
	if h.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
		t.Errorf("allowed origin preflight: %v", h)
	}
	if h := preflight("https://evil.example.com"); h.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("other origin got %q", h.Get("Access-Control-Allow-Origin"))
	}
	rec = record(api, http.MethodGet, "/healthz", nil)
	if rec.header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id on responses")
	}
}

type recorded struct {
	code   int
	header http.Header
	body   []byte
}

func record(h http.Handler, method, path string, header http.Header) recorded {
	req, _ := http.NewRequest(method, path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return recorded{code: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

// TestOpenAPIServed checks that the API serves its OpenAPI document below the base path, to
// anyone, describing the methods this server answers at its base path.
func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	api, err := server.New(server.Options{Pool: dbtest.Pool(t), Secret: servertest.Secret, BasePath: "/v1/api"})
	if err != nil {
		t.Fatal(err)
	}
	rec := record(api, http.MethodGet, "/v1/api/openapi.json", nil)
	var doc struct {
		OpenAPI string                     `json:"openapi"`
		Servers []struct{ URL string }     `json:"servers"`
		Paths   map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(rec.body, &doc); err != nil || rec.code != http.StatusOK {
		t.Fatalf("openapi.json: %d %.200s %v", rec.code, rec.body, err)
	}
	if doc.OpenAPI != "3.1.0" || len(doc.Servers) != 1 || doc.Servers[0].URL != "/v1/api" {
		t.Errorf("openapi %q, servers %+v", doc.OpenAPI, doc.Servers)
	}
	if len(doc.Paths) != len(api.Registry().Methods()) || doc.Paths["/nodes/list"] == nil {
		t.Errorf("%d paths for %d methods", len(doc.Paths), len(api.Registry().Methods()))
	}
	if _, ok := doc.Paths["/eventStream/status"]; ok {
		t.Error("a module that is not enabled is in the document")
	}
}
