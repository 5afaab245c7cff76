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
//
// The template is named for the migrations it holds (bc_template_ and a hash of every migration's
// name and checksum) and is built under a PostgreSQL advisory lock: test binaries that share a
// server wait for one another instead of racing, reuse a template built by an earlier run, and a
// change to the migrations gets a template of its own. A template counts as built only once it is
// marked IS_TEMPLATE, so one left half-built by a crash is dropped and built again.
package dbtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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
	"github.com/better-compute/better-compute/queries"
)

// templateLockKey is the advisory lock every template builder holds (an arbitrary constant:
// "bc_template" in ASCII, truncated to fit a bigint).
const templateLockKey int64 = 0x62635f74656d706c

var (
	once     sync.Once
	setupErr error
	server   struct {
		cluster *pgcluster.Cluster
		tmpDir  string
		admin   *pgxpool.Pool
		baseURL string // connection URL of the maintenance database
	}
	// templateName is the migrated template's name, set by setup.
	templateName string
	seq          atomic.Int64
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
	return create(t, true)
}

// EmptyURL creates a fresh database without migrations, for tests of the migrator itself.
func EmptyURL(t testing.TB) string {
	t.Helper()
	return create(t, false)
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

// create copies the migrated template, or template1 when migrated is false.
func create(t testing.TB, migrated bool) string {
	t.Helper()
	if !mainRan {
		t.Fatal("dbtest: the package's TestMain must call dbtest.Main(m)")
	}
	once.Do(func() { setupErr = setup() })
	if setupErr != nil {
		t.Fatalf("dbtest: %v", setupErr)
	}
	template := "template1"
	if migrated {
		template = templateName
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
	name, err := templateNameFor()
	if err != nil {
		return err
	}
	if err := buildTemplate(ctx, admin, base, name); err != nil {
		return err
	}
	templateName = name
	return nil
}

// templateNameFor names the template for the migrations built into this binary.
func templateNameFor() (string, error) {
	ms, err := migrate.Load(queries.Migrations, "migrations")
	if err != nil {
		return "", fmt.Errorf("load migrations: %w", err)
	}
	h := sha256.New()
	for _, m := range ms {
		fmt.Fprintf(h, "%s %s\n", m, m.Checksum)
	}
	return "bc_template_" + hex.EncodeToString(h.Sum(nil))[:16], nil
}

// buildTemplate creates and migrates the template called name unless a complete one exists,
// holding the builders' advisory lock so that concurrent test binaries build it once.
func buildTemplate(ctx context.Context, admin *pgxpool.Pool, base, name string) error {
	conn, err := admin.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("template lock connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockKey); err != nil {
		return fmt.Errorf("take the template lock: %w", err)
	}
	defer func() {
		// A failed unlock leaves the lock to the session's end; dropping the connection ends it.
		if _, err := conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", templateLockKey); err != nil {
			_ = conn.Conn().Close(context.Background())
		}
	}()

	var exists, complete bool
	err = conn.QueryRow(ctx, "SELECT true, datistemplate FROM pg_database WHERE datname = $1", name).Scan(&exists, &complete)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("look for template %s: %w", name, err)
	}
	if complete {
		return nil
	}
	tmpl := pgx.Identifier{name}.Sanitize()
	if exists {
		// Left half-built by a builder that died.
		if _, err := conn.Exec(ctx, "DROP DATABASE "+tmpl+" WITH (FORCE)"); err != nil {
			return fmt.Errorf("drop half-built template %s: %w", name, err)
		}
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+tmpl); err != nil {
		return fmt.Errorf("create template %s: %w", name, err)
	}
	pool, err := database.Open(ctx, withDatabase(base, name))
	if err != nil {
		return fmt.Errorf("open template %s: %w", name, err)
	}
	err = migrate.Apply(ctx, pool, slog.New(slog.DiscardHandler))
	// Every connection to the template must be closed before it can be copied.
	pool.Close()
	if err != nil {
		return fmt.Errorf("migrate template %s: %w", name, err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+tmpl+" IS_TEMPLATE true"); err != nil {
		return fmt.Errorf("mark template %s: %w", name, err)
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
