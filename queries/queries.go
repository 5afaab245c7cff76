// Package queries holds every SQL statement of Better Compute: the schema migrations, which the
// migrator applies and sqlc reads as the schema, and the queries sqlc compiles into gen/db.
package queries

import "embed"

// Migrations holds the schema migrations, migrations/NNNN_name.sql, applied in version order.
//
//go:embed migrations/*.sql
var Migrations embed.FS
