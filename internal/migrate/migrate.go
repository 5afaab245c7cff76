// Package migrate applies the schema migrations in queries/migrations, and those of the enabled
// modules.
//
// Migrations are plain SQL files named NNNN_name.sql, forward only. Each pending migration runs
// in its own transaction together with the row that records it, so a failing migration leaves
// nothing behind. A session advisory lock makes concurrent migrators (several processes
// starting at once) take turns; the second finds the work done. The checksum of each applied
// migration is kept, and a migration edited after it was applied stops the migrator.
//
// # Modules
//
// A module (package module) may bring migrations of its own: NNNN_name.sql files at the root of
// an fs.FS, numbered from its own 0001, since a module's versions are its own. They follow the
// core's rules, recorded per module in module_migrations (a core migration) instead of
// schema_migrations:
//
//   - ApplyAll applies the core's pending migrations first and then each module's, in the order
//     given, so a module's migration may use the core's tables; the core's never use a module's.
//   - Every migrator takes the same advisory lock, so core and modules never migrate at once.
//   - A module's applied migration whose file has changed stops the migrator, and so does a
//     recorded migration of the module that the binary does not know (the database is newer);
//     the error names the module.
//   - A module that is not passed (not enabled) is not touched: its recorded rows and its tables
//     stay, and nothing of it is checked. Enabling it later applies what it lacks; disabling it
//     drops nothing.
//   - A module's name is 1 to 32 of a-z, 0-9 and '-', and its tables should carry its name as
//     a prefix (events_…), since all share one schema.
//
// This small migrator is ours rather than goose or golang-migrate because it reads the same
// embedded files sqlc reads as the schema, with no up/down annotations, and checks checksums,
// which neither does, in a few hundred lines.
package migrate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/queries"
)

// lockKey is the advisory lock every migrator takes ("bcmigrat" in ASCII).
const lockKey int64 = 0x62636d6967726174

// Migration is one schema change.
type Migration struct {
	Version  int64
	Name     string
	SQL      string
	Checksum string
	// Replaces are the checksums of earlier texts of this migration that a database may hold:
	// a file amended so that it also applies on a newer PostgreSQL, to the same schema, names
	// them on lines "-- replaces checksum <sha256>", and a database that applied the earlier
	// text is not refused for it.
	Replaces []string
}

// replacesLine names an earlier text of a migration (Migration.Replaces).
var replacesLine = regexp.MustCompile(`(?m)^-- replaces checksum ([0-9a-f]{64})$`)

// String names the migration as its file does, without the extension.
func (m Migration) String() string { return fmt.Sprintf("%04d_%s", m.Version, m.Name) }

// State is a migration and whether the database has it.
type State struct {
	Migration
	Applied   bool
	AppliedAt time.Time
}

// Migrator applies a set of migrations to one database: the core's or one module's.
type Migrator struct {
	pool       *pgxpool.Pool
	migrations []Migration
	ledger     ledger
}

// New returns a migrator for the migrations built into the binary.
func New(pool *pgxpool.Pool) (*Migrator, error) {
	ms, err := Load(queries.Migrations, "migrations")
	if err != nil {
		return nil, err
	}
	return NewWith(pool, ms), nil
}

// NewWith returns a migrator for the given migrations, which must be sorted by version (Load
// sorts them). Tests use it to apply migrations that are not built in.
func NewWith(pool *pgxpool.Pool, migrations []Migration) *Migrator {
	return &Migrator{pool: pool, migrations: migrations}
}

var fileName = regexp.MustCompile(`^(\d{4,})_([a-z0-9_]+)\.sql$`)

// Load reads NNNN_name.sql files from dir in fsys, sorted by version. Two files with one version,
// or a file named otherwise, are errors.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []Migration
	seen := map[int64]string{}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %s: name must be NNNN_lower_snake.sql", e.Name())
		}
		v, _ := strconv.ParseInt(m[1], 10, 64)
		if other, ok := seen[v]; ok {
			return nil, fmt.Errorf("migration files %s and %s share version %d", other, e.Name(), v)
		}
		seen[v] = e.Name()
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		sum := sha256.Sum256(b)
		mig := Migration{Version: v, Name: m[2], SQL: string(b), Checksum: hex.EncodeToString(sum[:])}
		for _, r := range replacesLine.FindAllStringSubmatch(mig.SQL, -1) {
			mig.Replaces = append(mig.Replaces, r[1])
		}
		ms = append(ms, mig)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}

// Status reports every known migration and whether it is applied. It fails if the database
// has a migration this binary does not know or one whose file has changed since.
func (m *Migrator) Status(ctx context.Context) ([]State, error) {
	return m.status(ctx, db.New(m.pool), false)
}

// Current reports whether the database has every migration this binary knows, for readiness
// checks: the binary's queries then find the schema they were written for. Migrations newer than
// the binary's newest (a newer release migrated the database during a rolling deploy) do not
// make it false, since migrations are forward-compatible and the old binary keeps serving until
// it is replaced. It fails on a migration edited after it was applied, and on an unknown one
// older than the binary's newest, which no release order explains.
func (m *Migrator) Current(ctx context.Context) (bool, error) {
	states, err := m.status(ctx, db.New(m.pool), true)
	if err != nil {
		return false, err
	}
	return len(pendingOf(states)) == 0, nil
}

// Pending lists the migrations Up would apply now.
func (m *Migrator) Pending(ctx context.Context) ([]Migration, error) {
	states, err := m.Status(ctx)
	if err != nil {
		return nil, err
	}
	return pendingOf(states), nil
}

// Up applies every pending migration in version order, each in its own transaction, and returns
// those it applied. It holds the migration lock throughout, so it is safe to run from several
// processes at once.
func (m *Migrator) Up(ctx context.Context) ([]Migration, error) {
	conn, err := m.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: acquire connection: %w", err)
	}
	defer conn.Release()
	q := db.New(conn)
	if err := q.AcquireMigrationLock(ctx, lockKey); err != nil {
		return nil, fmt.Errorf("migrate: %stake the migration lock: %w", m.ledger.scope(), err)
	}
	defer func() {
		// Unlock on a fresh context: ctx may be the reason we are leaving. If even that fails
		// the lock dies with the session, so drop the connection rather than pool it.
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if q.ReleaseMigrationLock(uctx, lockKey) != nil {
			conn.Hijack().Close(uctx)
		}
	}()
	// Read the state under the lock: another migrator may have just finished.
	states, err := m.status(ctx, q, false)
	if err != nil {
		return nil, err
	}
	pending := pendingOf(states)
	if len(pending) > 0 {
		if err := m.ledger.ready(ctx, q); err != nil {
			return nil, err
		}
	}
	var applied []Migration
	for _, mig := range pending {
		if err := m.apply(ctx, conn.Conn(), mig); err != nil {
			return applied, err
		}
		applied = append(applied, mig)
	}
	return applied, nil
}

func (m *Migrator) apply(ctx context.Context, conn *pgx.Conn, mig Migration) error {
	scope := m.ledger.scope()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("%smigration %s: begin: %w", scope, mig, err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	// With no arguments pgx uses the simple protocol, which runs a file of many statements.
	if _, err := tx.Exec(ctx, mig.SQL); err != nil {
		return fmt.Errorf("%smigration %s: %w (rolled back)", scope, mig, err)
	}
	if err := m.ledger.record(ctx, db.New(tx), mig); err != nil {
		return fmt.Errorf("%smigration %s: record: %w (rolled back)", scope, mig, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("%smigration %s: commit: %w", scope, mig, err)
	}
	return nil
}

// status pairs the known migrations with the database's record. allowNewer skips recorded
// migrations past the newest known one instead of failing on them.
func (m *Migrator) status(ctx context.Context, q *db.Queries, allowNewer bool) ([]State, error) {
	rows, err := m.ledger.read(ctx, q)
	if err != nil {
		return nil, err
	}
	known := make(map[int64]Migration, len(m.migrations))
	var newest int64
	for _, mig := range m.migrations {
		known[mig.Version] = mig
		newest = max(newest, mig.Version)
	}
	applied := make(map[int64]db.SchemaMigration, len(rows))
	for _, r := range rows {
		mig, ok := known[r.Version]
		if !ok && allowNewer && r.Version > newest {
			continue
		}
		if !ok {
			return nil, fmt.Errorf("migrate: %sthe database has migration %04d_%s, which this binary does not know: it is older than the schema; run a newer release", m.ledger.scope(), r.Version, r.Name)
		}
		if mig.Checksum != r.Checksum && !slices.Contains(mig.Replaces, r.Checksum) {
			return nil, fmt.Errorf("migrate: %smigration %s was changed after it was applied (checksum %.12s, database has %.12s); write a new migration instead", m.ledger.scope(), mig, mig.Checksum, r.Checksum)
		}
		applied[r.Version] = r
	}
	states := make([]State, len(m.migrations))
	for i, mig := range m.migrations {
		r, ok := applied[mig.Version]
		states[i] = State{Migration: mig, Applied: ok, AppliedAt: r.AppliedAt}
	}
	return states, nil
}

func pendingOf(states []State) []Migration {
	var out []Migration
	for _, s := range states {
		if !s.Applied {
			out = append(out, s.Migration)
		}
	}
	return out
}

// Apply brings pool's schema up to date with the migrations built into the binary, logging each
// one it applies: what serve, dev and the tests do at start.
func Apply(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger) error {
	m, err := New(pool)
	if err != nil {
		return err
	}
	applied, err := m.Up(ctx)
	for _, a := range applied {
		log.Info("applied migration", "migration", a.String())
	}
	return err
}
