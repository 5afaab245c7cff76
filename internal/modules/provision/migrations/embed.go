// Package migrations holds the provision module's schema migrations, NNNN_name.sql, which the
// migrator applies (migrate.ApplyAll) when the module is enabled and sqlc reads as the schema of
// the module's queries (gen/modules/provision/db).
package migrations

import "embed"

// FS holds the module's migrations at its root, as migrate.LoadModule reads them.
//
//go:embed *.sql
var FS embed.FS
