// Package dbtest gives every test its own PostgreSQL database, cloned from a migrated template
// on one private cluster per test binary, so tests run against the real database, in isolation,
// with a fraction of a second of set-up each.
//
// A test package opts in with
//
//	func TestMain(m *testing.M) { dbtest.Main(m) }
//
// and a test calls Pool (or URL) for a fresh, migrated database. The cluster starts on first use,
// so a run that selects no database test starts none. BETTER_COMPUTE_TEST_DATABASE_URL points
// the tests at an existing server instead, with a role that may create databases.
package dbtest

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/migrate"
	"github.com/better-compute/better-compute/internal/pgcluster"
)

const templateName = "bc_template"

var (
	once     sync.Once
	setupErr error
	server   struct {
		cluster *pgcluster.Cluster
		tmpDir  string
		admin   *pgxpool.Pool
		baseURL string // connection URL of the maintenance database
	}
	seq atomic.Int64
	// createMu serialises CREATE DATABASE: PostgreSQL refuses to copy a template that another
	// CREATE DATABASE is copying at the same moment.
	createMu sync.Mutex
	mainRan  bool
)

// Main runs the tests and then stops the private cluster, if one was started.
func Main(m *testing.M) {
	mainRan = true
	code := m.Run()
	teardown()
	os.Exit(code)
}

// URL creates a fresh, migrated database for the test and returns its connection URL. The
// database is dropped when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	return create(t, templateName)
}

// EmptyURL creates a fresh database without migrations, for tests of the migrator itself.
func EmptyURL(t testing.TB) string {
	t.Helper()
	return create(t, "template1")
}

// Pool opens a pool on a fresh, migrated database; both are closed when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	u := URL(t)
	pool, err := database.Open(context.Background(), u)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func create(t testing.TB, template string) string {
	t.Helper()
	if !mainRan {
		t.Fatal("dbtest: the package's TestMain must call dbtest.Main(m)")
	}
	once.Do(func() { setupErr = setup() })
	if setupErr != nil {
		t.Fatalf("dbtest: %v", setupErr)
	}
	ctx := context.Background()
	name := fmt.Sprintf("test_%d_%d", os.Getpid(), seq.Add(1))
	createMu.Lock()
	_, err := server.admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE "+pgx.Identifier{template}.Sanitize())
	createMu.Unlock()
	if err != nil {
		t.Fatalf("dbtest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := server.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("dbtest: drop database %s: %v", name, err)
		}
	})
	return withDatabase(server.baseURL, name)
}

func setup() error {
	ctx := context.Background()
	base := os.Getenv("BETTER_COMPUTE_TEST_DATABASE_URL")
	if base == "" {
		tmp, err := os.MkdirTemp("", "bc-pgtest-")
		if err != nil {
			return err
		}
		// The server may run as the postgres user, which must reach the cluster directory.
		if err := os.Chmod(tmp, 0o755); err != nil {
			return err
		}
		server.tmpDir = tmp
		c, err := pgcluster.Start(ctx, pgcluster.Options{Dir: tmp + "/cluster", Ephemeral: true})
		if err != nil {
			return err
		}
		server.cluster = c
		base = c.URL("postgres")
	}
	server.baseURL = base
	admin, err := database.Open(ctx, base)
	if err != nil {
		return err
	}
	server.admin = admin
	// Build the template once: migrate it, then close every connection to it so it can be copied.
	tmpl := pgx.Identifier{templateName}.Sanitize()
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+tmpl+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop old template: %w", err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+tmpl); err != nil {
		return fmt.Errorf("create template: %w", err)
	}
	pool, err := database.Open(ctx, withDatabase(base, templateName))
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := migrate.Apply(ctx, pool, slog.New(slog.DiscardHandler)); err != nil {
		return fmt.Errorf("migrate template: %w", err)
	}
	return nil
}

func teardown() {
	if server.admin != nil {
		server.admin.Close()
	}
	if server.cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := server.cluster.Stop(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "dbtest:", err)
		}
	}
	if server.tmpDir != "" {
		_ = os.RemoveAll(server.tmpDir)
	}
}

// withDatabase returns the URL with its database name replaced.
func withDatabase(base, name string) string {
	u, err := url.Parse(base)
	if err != nil {
		// Keyword/value connection strings: append the name; a later key wins.
		return base + " dbname=" + name
	}
	u.Path = "/" + name
	return u.String()
}
