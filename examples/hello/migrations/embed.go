// Package migrations holds the hello module's schema migrations, NNNN_name.sql: applied after
// the core's when the module is enabled, and the schema sqlc reads for the module's queries.
package migrations

import "embed"

// FS holds the migrations at its root.
//
//go:embed *.sql
var FS embed.FS
