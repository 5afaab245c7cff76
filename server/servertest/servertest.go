// Package servertest runs the real API over real HTTP on a fresh database, for tests of the
// server and of anything that calls it.
package servertest

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/go/bettercompute/audit/v1/auditv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1/iamv1connect"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/server"
)

// Secret is the deployment secret of test servers.
const Secret = "test-secret-0123456789abcdef-0123456789"

// Env is a running API.
type Env struct {
	// URL is the API base URL, including the base path.
	URL  string
	Pool *pgxpool.Pool
	// AdminKey is an owner of the root tenant.
	AdminKey string
	Server   *httptest.Server
}

// New starts the API on a fresh, migrated database (the test package's TestMain must call
// dbtest.Main) and mints a root admin key.
func New(t testing.TB) *Env {
	t.Helper()
	return Start(t, dbtest.Pool(t), nil)
}

// Start starts the API on pool, with configure (if not nil) adjusting its options first, and
// mints a root admin key. The API's BaseURL is where it listens (http://127.0.0.1:port), unless
// configure sets another.
func Start(t testing.TB, pool *pgxpool.Pool, configure func(*server.Options)) *Env {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts := server.Options{Pool: pool, Secret: Secret, BaseURL: "http://" + ln.Addr().String()}
	if configure != nil {
		configure(&opts)
	}
	api, err := server.New(opts)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(api)
	ts.Listener.Close()
	ts.Listener = ln
	ts.Config.Protocols = new(http.Protocols)
	ts.Config.Protocols.SetHTTP1(true)
	ts.Config.Protocols.SetUnencryptedHTTP2(true)
	ts.Start()
	t.Cleanup(ts.Close)
	key, err := auth.MintAdminKey(context.Background(), pool, "admin")
	if err != nil {
		t.Fatal(err)
	}
	return &Env{URL: ts.URL + server.DefaultBasePath, Pool: pool, AdminKey: key.String(), Server: ts}
}

// HTTPClient returns a client that sends key (when not empty) and the X-Better-Compute header
// on every request.
func (e *Env) HTTPClient(key string) *http.Client {
	return &http.Client{Transport: headers{key: key, next: e.Server.Client().Transport}}
}

// IAM returns an IamService client calling with key.
func (e *Env) IAM(key string) iamv1connect.IamServiceClient {
	return iamv1connect.NewIamServiceClient(e.HTTPClient(key), e.URL)
}

// Audit returns an AuditService client calling with key.
func (e *Env) Audit(key string) auditv1connect.AuditServiceClient {
	return auditv1connect.NewAuditServiceClient(e.HTTPClient(key), e.URL)
}

type headers struct {
	key  string
	next http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Better-Compute", "1")
	if h.key != "" && r.Header.Get("Authorization") == "" {
		r.Header.Set("Authorization", "Bearer "+h.key)
	}
	return h.next.RoundTrip(r)
}
