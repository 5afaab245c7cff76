package compute_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	compute "github.com/better-compute/better-compute"
	"github.com/better-compute/better-compute/client"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/module"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const secret = "compute-test-secret-0123456789abcdef"

// TestEmbedded mounts the API under /compute/ in a mux of the test's own, beside a route of its
// own, runs the worker roles in the same process, and calls the API through the SDK.
func TestEmbedded(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	d, err := compute.New(ctx, compute.Config{
		DatabaseURL: dbtest.EmptyURL(t), Secret: secret, Prefix: "/compute",
		Modules: compute.StandardModules(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	if err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx, compute.RoleAPI, compute.RoleControllers, compute.RoleScheduler); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := d.Wait(); err != nil {
			t.Error(err)
		}
	})
	mux := http.NewServeMux()
	mux.Handle("/compute/", d.Handler())
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello") })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	for path, want := range map[string]string{"/hello": "hello", "/compute/healthz": "ok"} {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s: %d %q, want 200 with %q", path, res.StatusCode, body, want)
		}
	}
	key, err := d.MintAdminKey(ctx, "embedded-test")
	if err != nil {
		t.Fatal(err)
	}
	c := client.New(srv.URL+"/compute/api", client.WithAPIKey(key))
	if _, err := c.Nodes.List(ctx, &nodesv1.ListRequest{}); err != nil {
		t.Fatalf("nodes/list through the embedded API: %v", err)
	}
}

func TestHandlerBeforeStart(t *testing.T) {
	t.Parallel()
	d, err := compute.New(context.Background(), compute.Config{Pool: dbtest.Pool(t), Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	d.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("before Start: %d, want 503", rec.Code)
	}
}

// TestRouteClashes: doctor reports a route on the API's paths, and Start refuses to run it.
func TestRouteClashes(t *testing.T) {
	t.Parallel()
	ok := http.NotFoundHandler()
	cases := map[string]struct {
		prefix, pattern string
		clash           bool
	}{
		"own path":              {"", "GET /status", false},
		"below the base path":   {"", "POST /api/billing/charge", true},
		"the base path itself":  {"", "/api", true},
		"health":                {"", "GET /healthz", true},
		"everything":            {"", "/", true},
		"wildcard":              {"", "GET /{any}/", true},
		"outside the prefix":    {"/compute", "GET /healthz", false},
		"inside the prefix":     {"/compute", "GET /compute/dashboard/x", true},
		"host-specific, clear":  {"", "example.com/billing/", false},
		"host-specific, clash":  {"", "example.com/", true},
		"other method, subtree": {"", "DELETE /metrics", true},
	}
	pool := dbtest.Pool(t)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d, err := compute.New(context.Background(), compute.Config{
				Pool: pool, Secret: secret, Prefix: tc.prefix,
				Routes: []compute.Route{{Pattern: tc.pattern, Handler: ok}},
			})
			if err != nil {
				t.Fatal(err)
			}
			findings, err := d.Doctor(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var got module.Finding
			for _, f := range findings {
				if f.Check == "host routes" {
					got = f
				}
			}
			if (got.Severity == module.Error) != tc.clash {
				t.Fatalf("%q with prefix %q: finding %+v, want clash %v", tc.pattern, tc.prefix, got, tc.clash)
			}
			if tc.clash {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if err := d.Start(ctx, compute.RoleAPI); err == nil || !strings.Contains(err.Error(), tc.pattern) {
					t.Fatalf("Start with a clashing route: %v", err)
				}
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	for name, tc := range map[string]struct {
		cfg  compute.Config
		want string
	}{
		"bad pattern":    {compute.Config{Pool: pool, Secret: secret, Routes: []compute.Route{{Pattern: "GET", Handler: http.NotFoundHandler()}}}, "routes[0]"},
		"no handler":     {compute.Config{Pool: pool, Secret: secret, Routes: []compute.Route{{Pattern: "/x"}}}, "routes[0]"},
		"unknown module": {compute.Config{Pool: pool, Secret: secret, Environ: []string{"BETTER_COMPUTE_MODULES=billing"}}, "billing"},
		"no secret":      {compute.Config{Pool: pool}, "secret"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if _, err := compute.New(context.Background(), tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want an error naming %q", err, tc.want)
			}
		})
	}
}
