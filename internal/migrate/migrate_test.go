package migrate_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/migrate"
	"github.com/better-compute/better-compute/queries"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func open(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := database.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func TestMigratedDatabaseHasBtreeGist(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	ok, err := db.New(pool).ExtensionInstalled(t.Context(), "btree_gist")
	if err != nil || !ok {
		t.Fatalf("btree_gist installed = %v, %v", ok, err)
	}
	m, err := migrate.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	if current, err := m.Current(t.Context()); err != nil || !current {
		t.Fatalf("Current = %v, %v", current, err)
	}
}

func TestUpIsIdempotentAndConcurrentSafe(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := open(t, dbtest.EmptyURL(t))
	m, err := migrate.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	all, err := migrate.Load(queries.Migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	// Several processes starting at once: the lock lets exactly one apply each migration.
	var wg sync.WaitGroup
	counts := make([]int, 4)
	errs := make([]error, 4)
	for i := range counts {
		wg.Go(func() {
			applied, err := m.Up(ctx)
			counts[i], errs[i] = len(applied), err
		})
	}
	wg.Wait()
	total := 0
	for i := range counts {
		if errs[i] != nil {
			t.Fatalf("Up %d: %v", i, errs[i])
		}
		total += counts[i]
	}
	if total != len(all) {
		t.Fatalf("applied %d migrations in total, want %d", total, len(all))
	}
	pending, err := m.Pending(ctx)
	if err != nil || len(pending) != 0 {
		t.Fatalf("Pending after Up = %v, %v", pending, err)
	}
}

func TestFailedMigrationRollsBack(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := open(t, dbtest.EmptyURL(t))
	init, err := migrate.Load(queries.Migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	fsys := fstest.MapFS{
		"m/9001_half.sql": {Data: []byte("CREATE TABLE half_done (id int);\nSELECT 1/0;\n")},
	}
	bad, err := migrate.Load(fsys, "m")
	if err != nil {
		t.Fatal(err)
	}
	m := migrate.NewWith(pool, append(init, bad...))
	applied, err := m.Up(ctx)
	if err == nil || !strings.Contains(err.Error(), "9001_half") {
		t.Fatalf("Up = %v, want an error naming 9001_half", err)
	}
	if len(applied) != len(init) {
		t.Fatalf("applied %d before the failure, want %d", len(applied), len(init))
	}
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('half_done') IS NOT NULL").Scan(&exists); err != nil || exists {
		t.Fatalf("table of the failed migration exists = %v, %v; want rolled back", exists, err)
	}
	pending, err := m.Pending(ctx)
	if err != nil || len(pending) != 1 || pending[0].Version != 9001 {
		t.Fatalf("Pending = %v, %v; want only 9001", pending, err)
	}
}

func TestEditedMigrationIsRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	ms, err := migrate.Load(queries.Migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	ms[0].Checksum = "0000"
	if _, err := migrate.NewWith(pool, ms).Up(ctx); err == nil || !strings.Contains(err.Error(), "changed after it was applied") {
		t.Fatalf("Up with an edited migration = %v", err)
	}
	// And a binary that does not know a migration the database has is refused too.
	if _, err := migrate.NewWith(pool, nil).Status(ctx); err == nil || !strings.Contains(err.Error(), "does not know") {
		t.Fatalf("Status with an unknown applied migration = %v", err)
	}
}

// TestAmendedMigrationIsAccepted checks that a migration amended with a "replaces checksum"
// line is accepted by a database that applied the earlier text, and only that text.
func TestAmendedMigrationIsAccepted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t) // migrated with the files as they are
	ms, err := migrate.Load(queries.Migrations, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	var amended migrate.Migration
	for _, m := range ms {
		if m.Version == 16 {
			amended = m
		}
	}
	if len(amended.Replaces) != 1 {
		t.Fatalf("0016 replaces %v, want the checksum of its earlier text", amended.Replaces)
	}
	if _, err := pool.Exec(ctx, `UPDATE schema_migrations SET checksum = $1 WHERE version = 16`, amended.Replaces[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.NewWith(pool, ms).Status(ctx); err != nil {
		t.Fatalf("a database that applied the earlier 0016: %v", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE schema_migrations SET checksum = 'feed' WHERE version = 16`); err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.NewWith(pool, ms).Status(ctx); err == nil || !strings.Contains(err.Error(), "changed after it was applied") {
		t.Fatalf("another earlier text = %v", err)
	}
}

func TestLoadRejectsBadNames(t *testing.T) {
	t.Parallel()
	for name, fsys := range map[string]fstest.MapFS{
		"bad name":      {"m/init.sql": {Data: []byte("SELECT 1")}},
		"dup version":   {"m/0001_a.sql": {Data: []byte("SELECT 1")}, "m/0001_b.sql": {Data: []byte("SELECT 1")}},
		"upper in name": {"m/0001_Init.sql": {Data: []byte("SELECT 1")}},
	} {
		if _, err := migrate.Load(fsys, "m"); err == nil {
			t.Errorf("%s: Load succeeded", name)
		}
	}
}
