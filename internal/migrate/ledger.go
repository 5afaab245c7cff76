package migrate

import (
	"context"
	"fmt"
	"regexp"

	"github.com/better-compute/better-compute/gen/db"
)

// moduleName is what a module's name must look like, as module_migrations checks it too.
var moduleName = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)

// ledger is where a migrator's applied migrations are recorded: schema_migrations for the core,
// the module's rows of module_migrations for a module. It is all that tells a module's migrator
// from the core's.
type ledger struct {
	module string // empty for the core
}

// scope prefixes messages about the ledger's migrations: nothing for the core, the module's name
// for a module.
func (l ledger) scope() string {
	if l.module == "" {
		return ""
	}
	return "module " + l.module + ": "
}

// read returns the recorded migrations (a module's in the core's row type), none when the table
// does not exist yet.
func (l ledger) read(ctx context.Context, q *db.Queries) ([]db.SchemaMigration, error) {
	if l.module == "" {
		if exists, err := q.SchemaMigrationsExists(ctx); err != nil || !exists {
			return nil, l.wrapRead(err)
		}
		rows, err := q.ListAppliedMigrations(ctx)
		return rows, l.wrapRead(err)
	}
	if !moduleName.MatchString(l.module) {
		return nil, fmt.Errorf("migrate: module name %q: want 1 to 32 of a-z, 0-9 and -", l.module)
	}
	if exists, err := q.ModuleMigrationsExists(ctx); err != nil || !exists {
		return nil, l.wrapRead(err)
	}
	rows, err := q.ListAppliedModuleMigrations(ctx, l.module)
	out := make([]db.SchemaMigration, len(rows))
	for i, r := range rows {
		out[i] = db.SchemaMigration(r)
	}
	return out, l.wrapRead(err)
}

func (l ledger) wrapRead(err error) error {
	if err != nil {
		return fmt.Errorf("migrate: %sread applied migrations: %w", l.scope(), err)
	}
	return nil
}

// ready fails when the ledger cannot record yet: a module's table is a core migration's.
func (l ledger) ready(ctx context.Context, q *db.Queries) error {
	if l.module == "" {
		return nil
	}
	exists, err := q.ModuleMigrationsExists(ctx)
	switch {
	case err != nil:
		return l.wrapRead(err)
	case !exists:
		return fmt.Errorf("migrate: %sthe database has no module_migrations table: apply the core migrations first", l.scope())
	}
	return nil
}

// record notes mig as applied, in the transaction that applied it.
func (l ledger) record(ctx context.Context, q *db.Queries, mig Migration) error {
	if l.module == "" {
		return q.RecordMigration(ctx, db.RecordMigrationParams{
			Version: mig.Version, Name: mig.Name, Checksum: mig.Checksum,
		})
	}
	return q.RecordModuleMigration(ctx, db.RecordModuleMigrationParams{
		Module: l.module, Version: mig.Version, Name: mig.Name, Checksum: mig.Checksum,
	})
}
