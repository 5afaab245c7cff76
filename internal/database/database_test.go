package database_test

import (
	"context"
	"testing"

	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestOpenPoolSize checks who sizes a pool: the configuration's MaxConns first, then the URL's
// pool_max_conns, then DefaultMaxConns; and that Name tells the pool apart in
// pg_stat_activity.
func TestOpenPoolSize(t *testing.T) {
	t.Parallel()
	url := dbtest.EmptyURL(t) // has a query already (sslmode)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		url  string
		opts database.PoolOptions
		want int32
	}{
		{"default", url, database.PoolOptions{}, database.DefaultMaxConns},
		{"configured", url, database.PoolOptions{MaxConns: 3}, 3},
		{"url", url + "&pool_max_conns=5", database.PoolOptions{}, 5},
		{"configured over url", url + "&pool_max_conns=5", database.PoolOptions{MaxConns: 7}, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, err := database.OpenPool(ctx, tc.url, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			if got := pool.Config().MaxConns; got != tc.want {
				t.Errorf("MaxConns %d, want %d", got, tc.want)
			}
		})
	}
	pool, err := database.OpenPool(ctx, url, database.PoolOptions{MaxConns: 1, Name: "notifier"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var name string
	if err := pool.QueryRow(ctx, "SELECT current_setting('application_name')").Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name != "better-compute-notifier" {
		t.Errorf("application_name %q, want better-compute-notifier", name)
	}
}
