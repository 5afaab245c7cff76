package migrate

import (
	"context"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ModuleMigrations names an enabled module and its migrations, NNNN_name.sql files at the root of
// FS.
type ModuleMigrations struct {
	Name string
	FS   fs.FS
}

// LoadModule reads a module's migrations from the root of fsys, sorted by version, by Load's rules.
// The name must be one module_migrations accepts: 1 to 32 of a-z, 0-9 and '-'.
func LoadModule(name string, fsys fs.FS) ([]Migration, error) {
	if !moduleName.MatchString(name) {
		return nil, fmt.Errorf("migrate: module name %q: want 1 to 32 of a-z, 0-9 and -", name)
	}
	ms, err := Load(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("migrate: module %s: %w", name, err)
	}
	return ms, nil
}

// NewModule returns a migrator for one module's migrations, sorted by version (LoadModule sorts
// them). It works as the core's does, with the module's applied migrations recorded in
// module_migrations; Up fails while the core's migrations have not created that table.
func NewModule(pool *pgxpool.Pool, name string, migrations []Migration) *Migrator {
	return &Migrator{pool: pool, migrations: migrations, ledger: ledger{module: name}}
}

// ApplyAll brings pool's schema up to date with the core's migrations and then with each module's,
// in the order given, logging each migration it applies: what Apply does, for a process with
// modules enabled. Modules not given are left as they are. Every module's files are read before
// anything is applied, so a malformed one changes nothing.
func ApplyAll(ctx context.Context, pool *pgxpool.Pool, log *slog.Logger, modules []ModuleMigrations) error {
	migrators := make([]*Migrator, 0, len(modules))
	seen := make(map[string]bool, len(modules))
	for _, mod := range modules {
		if seen[mod.Name] {
			return fmt.Errorf("migrate: module %s is given twice", mod.Name)
		}
		seen[mod.Name] = true
		ms, err := LoadModule(mod.Name, mod.FS)
		if err != nil {
			return err
		}
		migrators = append(migrators, NewModule(pool, mod.Name, ms))
	}
	if err := Apply(ctx, pool, log); err != nil {
		return err
	}
	for i, m := range migrators {
		applied, err := m.Up(ctx)
		for _, a := range applied {
			log.Info("applied migration", "module", modules[i].Name, "migration", a.String())
		}
		if err != nil {
			return err
		}
	}
	return nil
}
