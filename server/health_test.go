package server_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/migrate"
	"github.com/better-compute/better-compute/queries"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

// get answers GET path from api, status and body.
func get(t *testing.T, api http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

// TestReadinessFollowsTheBinarysMigrations: /readyz is ready when the database has every
// migration this binary knows, newer ones included (an old replica during a rolling deploy),
// and not ready while one of them is pending; either way it says nothing more to anonymous
// callers.
func TestReadinessFollowsTheBinarysMigrations(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	known, err := migrate.Load(queries.Migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	newer := migrate.Migration{Version: known[len(known)-1].Version + 1000, Name: "from_a_newer_release",
		SQL: "CREATE TABLE from_a_newer_release (id int)", Checksum: "0123456789abcdef"}
	for _, tc := range []struct {
		name       string
		migrations []migrate.Migration
		status     int
		body       string
	}{
		{"newer migrations applied", append(known[:len(known):len(known)], newer), http.StatusOK, "ready\n"},
		{"a migration pending", known[:len(known)-1], http.StatusServiceUnavailable, "not ready\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, err := database.Open(ctx, dbtest.EmptyURL(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			if _, err := migrate.NewWith(pool, tc.migrations).Up(ctx); err != nil {
				t.Fatal(err)
			}
			api, err := server.New(server.Options{Pool: pool, Secret: servertest.Secret})
			if err != nil {
				t.Fatal(err)
			}
			if status, body := get(t, api, "/readyz"); status != tc.status || body != tc.body {
				t.Errorf("GET /readyz = %d %q, want %d %q", status, body, tc.status, tc.body)
			}
		})
	}
}

// TestMetricsElsewhere: with metrics on a listener of their own, the API's port has no /metrics.
func TestMetricsElsewhere(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	for _, elsewhere := range []bool{false, true} {
		api, err := server.New(server.Options{Pool: pool, Secret: servertest.Secret, MetricsElsewhere: elsewhere})
		if err != nil {
			t.Fatal(err)
		}
		want := http.StatusOK
		if elsewhere {
			want = http.StatusNotFound
		}
		if status, _ := get(t, api, "/metrics"); status != want {
			t.Errorf("MetricsElsewhere %v: GET /metrics = %d, want %d", elsewhere, status, want)
		}
	}
}
