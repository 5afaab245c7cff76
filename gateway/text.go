package gateway

import (
	"errors"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
)

// What the gateway accepts of the text a node controls. Names the node chooses once and that
// others read (its hostname, its event types) must be clean, or the node is told so; what it
// reports (inventory, command output and errors, event data) is scrubbed (package scrub) and
// stored, so that odd bytes never cost a node its session.

// validHostname reports whether a hostname given at Join is UTF-8 without control characters
// (C0, DEL and C1): it is shown in lists, logs and events, where a NUL cannot be stored and an
// escape sequence must not reach a terminal.
func validHostname(h string) bool {
	if !utf8.ValidString(h) {
		return false
	}
	for _, r := range h {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// unstorable reports whether err is PostgreSQL refusing the content of a write (a data
// exception, a failed check, a value past a size limit) rather than failing to write: the same
// content would be refused again, so the gateway records what it can and moves on instead of
// ending the session, which the daemon would answer by resending it after every reconnect.
func unstorable(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || len(pgErr.Code) != 5 {
		return false
	}
	switch pgErr.Code[:2] {
	case "22", "54": // data exception, program limit exceeded
		return true
	}
	return pgErr.Code == "23514" // check violation
}

// sqlState is the SQLSTATE of a PostgreSQL error, "" for other errors: what a stored message
// may say about a refusal without quoting the refused content.
func sqlState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}
