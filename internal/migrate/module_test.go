package migrate_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/migrate"
)

// alpha is a module whose first migration uses a core table, so it can only run after the core's,
// and whose runs table counts how often each migration ran.
func alpha() fstest.MapFS {
	return fstest.MapFS{
		"0001_things.sql": {Data: []byte(`
CREATE TABLE alpha_things (tenant_id uuid NOT NULL REFERENCES tenants (id));
CREATE TABLE alpha_runs (version int NOT NULL);
INSERT INTO alpha_runs VALUES (1);`)},
		"0002_more.sql": {Data: []byte("INSERT INTO alpha_runs VALUES (2);")},
	}
}

// beta is a second module, numbered from its own 0001.
func beta() fstest.MapFS {
	return fstest.MapFS{"0001_init.sql": {Data: []byte("CREATE TABLE beta_things (id int);")}}
}

// syncBuffer collects log output from several goroutines.
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

func tableExists(t *testing.T, pool *pgxpool.Pool, name string) bool {
	t.Helper()
	var ok bool
	if err := pool.QueryRow(t.Context(), "SELECT to_regclass($1) IS NOT NULL", name).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

func moduleRows(t *testing.T, pool *pgxpool.Pool, module string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM module_migrations WHERE module = $1", module).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestApplyAllConcurrentOnEmptyDatabase: processes starting at once on an empty database apply
// the core and then every module migration exactly once, the core's first (alpha's first
// migration references tenants).
func TestApplyAllConcurrentOnEmptyDatabase(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := open(t, dbtest.EmptyURL(t))
	mods := []migrate.ModuleMigrations{{Name: "alpha", FS: alpha()}, {Name: "beta", FS: beta()}}
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = migrate.ApplyAll(ctx, pool, log, mods) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("ApplyAll %d: %v", i, err)
		}
	}
	var runs []int32
	rows, err := pool.Query(ctx, "SELECT version FROM alpha_runs ORDER BY version")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v int32
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, v)
	}
	if rows.Err() != nil || len(runs) != 2 || runs[0] != 1 || runs[1] != 2 {
		t.Fatalf("alpha's migrations ran %v (%v), want [1 2]", runs, rows.Err())
	}
	if n := strings.Count(logs.String(), "module=alpha"); n != 2 {
		t.Errorf("logged %d applied alpha migrations, want 2:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "module=beta"); n != 1 {
		t.Errorf("logged %d applied beta migrations, want 1", n)
	}
	if !tableExists(t, pool, "beta_things") || moduleRows(t, pool, "alpha") != 2 || moduleRows(t, pool, "beta") != 1 {
		t.Fatal("module migrations not recorded per module")
	}
	core, err := migrate.New(pool)
	if err != nil {
		t.Fatal(err)
	}
	if current, err := core.Current(ctx); err != nil || !current {
		t.Fatalf("core Current = %v, %v", current, err)
	}
}

// TestModuleMigrationsAreIdempotent: a second run applies nothing, and the module's migrator
// reports every migration applied.
func TestModuleMigrationsAreIdempotent(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	mods := []migrate.ModuleMigrations{{Name: "alpha", FS: alpha()}}
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	if err := migrate.ApplyAll(ctx, pool, log, mods); err != nil {
		t.Fatal(err)
	}
	first := strings.Count(logs.String(), "applied migration")
	if err := migrate.ApplyAll(ctx, pool, log, mods); err != nil {
		t.Fatal(err)
	}
	if first != 2 || strings.Count(logs.String(), "applied migration") != first {
		t.Fatalf("applied %d, then more: %s", first, logs.String())
	}
	ms, err := migrate.LoadModule("alpha", alpha())
	if err != nil {
		t.Fatal(err)
	}
	m := migrate.NewModule(pool, "alpha", ms)
	states, err := m.Status(ctx)
	if err != nil || len(states) != 2 || !states[0].Applied || !states[1].Applied || states[1].AppliedAt.IsZero() {
		t.Fatalf("Status = %+v, %v", states, err)
	}
	if applied, err := m.Up(ctx); err != nil || len(applied) != 0 {
		t.Fatalf("Up again = %v, %v", applied, err)
	}
}

// TestChangedModuleMigrationIsRefused: an applied module migration whose file changed stops the
// migrator with a message naming the module and the file; one the binary does not know means
// the database is newer.
func TestChangedModuleMigrationIsRefused(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	discard := slog.New(slog.DiscardHandler)
	if err := migrate.ApplyAll(ctx, pool, discard, []migrate.ModuleMigrations{{Name: "alpha", FS: alpha()}}); err != nil {
		t.Fatal(err)
	}
	edited := alpha()
	edited["0002_more.sql"] = &fstest.MapFile{Data: []byte("INSERT INTO alpha_runs VALUES (22);")}
	err := migrate.ApplyAll(ctx, pool, discard, []migrate.ModuleMigrations{{Name: "alpha", FS: edited}})
	for _, want := range []string{"module alpha", "0002_more", "changed after it was applied"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("ApplyAll with an edited migration = %v, want it to contain %q", err, want)
		}
	}

	older := alpha()
	delete(older, "0002_more.sql")
	ms, err := migrate.LoadModule("alpha", older)
	if err != nil {
		t.Fatal(err)
	}
	m := migrate.NewModule(pool, "alpha", ms)
	if _, err := m.Status(ctx); err == nil || !strings.Contains(err.Error(), "module alpha") || !strings.Contains(err.Error(), "does not know") {
		t.Fatalf("Status with an unknown applied migration = %v", err)
	}
	if current, err := m.Current(ctx); err != nil || !current {
		t.Fatalf("Current of an older binary = %v, %v; want true", current, err)
	}
}

// TestDisabledModuleIsNotTouched: a module not passed gets no tables; passing it later applies
// them once; not passing it again checks nothing of it and removes nothing.
func TestDisabledModuleIsNotTouched(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	discard := slog.New(slog.DiscardHandler)
	if err := migrate.ApplyAll(ctx, pool, discard, []migrate.ModuleMigrations{{Name: "beta", FS: beta()}}); err != nil {
		t.Fatal(err)
	}
	if tableExists(t, pool, "alpha_things") || moduleRows(t, pool, "alpha") != 0 {
		t.Fatal("a module that was not passed got its tables")
	}
	if err := migrate.ApplyAll(ctx, pool, discard, []migrate.ModuleMigrations{{Name: "beta", FS: beta()}, {Name: "alpha", FS: alpha()}}); err != nil {
		t.Fatal(err)
	}
	if !tableExists(t, pool, "alpha_things") || moduleRows(t, pool, "alpha") != 2 || moduleRows(t, pool, "beta") != 1 {
		t.Fatal("enabling alpha did not apply its migrations once")
	}
	// A binary without alpha does not know its recorded migrations, and does not mind.
	if err := migrate.ApplyAll(ctx, pool, discard, nil); err != nil {
		t.Fatalf("ApplyAll without modules = %v", err)
	}
	if !tableExists(t, pool, "alpha_things") || moduleRows(t, pool, "alpha") != 2 {
		t.Fatal("disabling alpha removed its tables or rows")
	}
}

// TestModuleNeedsTheCoreFirst: a module's migrator on a database without the core's migrations
// says so instead of failing on a missing table.
func TestModuleNeedsTheCoreFirst(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := open(t, dbtest.EmptyURL(t))
	ms, err := migrate.LoadModule("beta", beta())
	if err != nil {
		t.Fatal(err)
	}
	m := migrate.NewModule(pool, "beta", ms)
	if pending, err := m.Pending(ctx); err != nil || len(pending) != 1 {
		t.Fatalf("Pending = %v, %v; want beta's one migration", pending, err)
	}
	if _, err := m.Up(ctx); err == nil || !strings.Contains(err.Error(), "core migrations first") {
		t.Fatalf("Up = %v, want an error asking for the core migrations", err)
	}
	if tableExists(t, pool, "beta_things") {
		t.Fatal("beta's table exists")
	}
}

func TestLoadModuleRejectsBadInput(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		module string
		fsys   fstest.MapFS
		want   string
	}{
		"upper-case name":   {"Alpha", beta(), "module name"},
		"empty name":        {"", beta(), "module name"},
		"underscore name":   {"al_pha", beta(), "module name"},
		"33-character name": {strings.Repeat("a", 33), beta(), "module name"},
		"bad file name":     {"alpha", fstest.MapFS{"init.sql": {Data: []byte("SELECT 1")}}, "module alpha"},
		"dup version":       {"alpha", fstest.MapFS{"0001_a.sql": {Data: []byte("")}, "0001_b.sql": {Data: []byte("")}}, "module alpha"},
	} {
		if _, err := migrate.LoadModule(tc.module, tc.fsys); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: LoadModule = %v, want an error containing %q", name, err, tc.want)
		}
	}
	if ms, err := migrate.LoadModule(strings.Repeat("a", 32), beta()); err != nil || len(ms) != 1 {
		t.Errorf("LoadModule with a 32-character name = %v, %v", ms, err)
	}
}

func TestApplyAllRefusesBadModulesBeforeApplying(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := open(t, dbtest.EmptyURL(t))
	discard := slog.New(slog.DiscardHandler)
	for _, mods := range [][]migrate.ModuleMigrations{
		{{Name: "alpha", FS: alpha()}, {Name: "alpha", FS: alpha()}},
		{{Name: "alpha", FS: alpha()}, {Name: "Beta", FS: beta()}},
	} {
		if err := migrate.ApplyAll(ctx, pool, discard, mods); err == nil {
			t.Errorf("ApplyAll(%v) succeeded", mods)
		}
	}
	if tableExists(t, pool, "schema_migrations") {
		t.Fatal("the core was migrated before the modules were checked")
	}
}
