// Package apierr is the one place where errors become Connect errors. Handlers return the
// constructors' errors (or wrap database errors with context); the guard interceptor turns every
// error into a *connect.Error with ToConnect, so codes and messages are consistent across
// methods and internal details never reach a caller.
package apierr

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Error is an error with the Connect code a caller should see.
type Error struct {
	Code connect.Code
	// Field names the request field at fault, for InvalidArgument; empty otherwise.
	Field string
	Msg   string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Msg
	}
	return e.Msg
}

func newf(code connect.Code, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// InvalidArgument reports a bad request field; the message starts with the field's name.
func InvalidArgument(field, format string, args ...any) error {
	return &Error{Code: connect.CodeInvalidArgument, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// NotFound reports a missing object, or one the caller may not see (the two are not told apart,
// so ids of other tenants' objects cannot be probed).
func NotFound(format string, args ...any) error { return newf(connect.CodeNotFound, format, args...) }

// AlreadyExists reports a conflict with an existing object.
func AlreadyExists(format string, args ...any) error {
	return newf(connect.CodeAlreadyExists, format, args...)
}

// FailedPrecondition reports a request that is valid but cannot apply to the current state.
func FailedPrecondition(format string, args ...any) error {
	return newf(connect.CodeFailedPrecondition, format, args...)
}

// PermissionDenied reports an authenticated caller that may not do this.
func PermissionDenied(format string, args ...any) error {
	return newf(connect.CodePermissionDenied, format, args...)
}

// Unauthenticated reports a missing, malformed, unknown or expired credential.
func Unauthenticated(format string, args ...any) error {
	return newf(connect.CodeUnauthenticated, format, args...)
}

// ToConnect converts err for the wire. internal is true when the error is unexpected: the caller
// then sees only a generic message with the request id, and the server should log err.
func ToConnect(err error, requestID string) (cerr *connect.Error, internal bool) {
	var ae *Error
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &ae):
		return connect.NewError(ae.Code, errors.New(ae.Error())), false
	case errors.As(err, &cerr):
		return cerr, false
	case errors.Is(err, pgx.ErrNoRows):
		return connect.NewError(connect.CodeNotFound, errors.New("not found")), false
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, errors.New("canceled")), false
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, errors.New("deadline exceeded")), false
	case errors.As(err, &pgErr):
		if c, ok := constraintCode(pgErr); ok {
			return connect.NewError(c, errors.New(constraintMessage(pgErr))), false
		}
	}
	return connect.NewError(connect.CodeInternal, fmt.Errorf("internal error (request id %s)", requestID)), true
}

// constraintCode maps PostgreSQL integrity violations, which the schema uses as the last line of
// defence, to codes.
func constraintCode(e *pgconn.PgError) (connect.Code, bool) {
	switch e.Code {
	case "23505": // unique_violation
		return connect.CodeAlreadyExists, true
	case "23P01": // exclusion_violation: overlapping reservation and the like
		return connect.CodeFailedPrecondition, true
	case "23503": // foreign_key_violation
		return connect.CodeFailedPrecondition, true
	case "23514", "23502", "22001", "22P02": // check, not null, too long, invalid text
		return connect.CodeInvalidArgument, true
	case "40001", "40P01": // serialization failure, deadlock: the caller may retry
		return connect.CodeAborted, true
	}
	return 0, false
}

func constraintMessage(e *pgconn.PgError) string {
	switch {
	case e.Code == "23505":
		return fmt.Sprintf("already exists (%s)", e.ConstraintName)
	case e.Code == "40001" || e.Code == "40P01":
		return "conflict with a concurrent change; retry"
	case e.ColumnName != "":
		return fmt.Sprintf("%s: invalid value", e.ColumnName)
	case e.ConstraintName != "":
		return fmt.Sprintf("violates %s", e.ConstraintName)
	}
	return "invalid request"
}

// ParseID reads a request field that holds an object id.
func ParseID(field, s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, InvalidArgument(field, "must be a UUID, got %q", s)
	}
	return id, nil
}

// ParseOptionalID reads an optional id filter: nil when empty.
func ParseOptionalID(field, s string) (*uuid.UUID, error) {
	if s == "" {
		return nil, nil
	}
	id, err := ParseID(field, s)
	return &id, err
}

// NotFoundIfNoRows turns "no rows" from a tenant-scoped query into NotFound with the message;
// other errors pass through unchanged.
func NotFoundIfNoRows(err error, format string, args ...any) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return NotFound(format, args...)
	}
	return err
}

// FailedPreconditionField reports a request field whose value cannot be met by the current
// state (a pool too small for the lease, a window taken by a reservation).
func FailedPreconditionField(field, format string, args ...any) error {
	return &Error{Code: connect.CodeFailedPrecondition, Field: field, Msg: fmt.Sprintf(format, args...)}
}
