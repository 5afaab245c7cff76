// Package apierr is the one place where errors become Connect errors. Handlers return the
// constructors' errors (or wrap database errors with context); the guard interceptor turns every
// error into a *connect.Error with ToConnect, so codes and messages are consistent across
// methods and internal details never reach a caller.
//
// # Field violations
//
// InvalidArgument, FailedPreconditionField and the Parse helpers name the request
// field at fault; ToConnect sends each such field as a google.rpc.BadRequest field violation
// (field, description) in the error's details, besides the message "field: description", so SDKs
// can point at the field without parsing text. Join reports several bad fields of one request in
// one error. Field paths follow google.rpc: the proto field names (snake_case, as in the .proto
// file, not the JSON names) from the request message down, joined by dots, with [i] for a list
// item and ["key"] for a map entry, such as pool_id, spec.daemon_version,
// tolerations[0].operator and payload["argv"][1]. A path names the innermost field known to be
// wrong; when the fault is in a map's keys or values as a whole, the path is the map field and
// the description quotes the entry. The one exception is a request header, which is not a
// message field: it is named "<Header-Name> header" ("Idempotency-Key header").
//
// # Missing rows
//
// pgx.ErrNoRows is not an answer by itself: a handler that looks an object up says
// what was not found (NotFoundIfNoRows, or NotFound after errors.Is), and any "no rows" that
// reaches ToConnect unconverted is a bug, reported as Internal like any other unexpected error.
package apierr

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
)

// Error is an error with the Connect code a caller should see.
type Error struct {
	Code connect.Code
	// Field names the request field at fault (see the package doc for the path convention), for
	// InvalidArgument and FailedPreconditionField; empty otherwise.
	Field string
	Msg   string
	// More are the request's further bad fields, after Field, when one validation found several
	// (see Join). Each becomes a field violation of its own.
	More []FieldViolation
}

// FieldViolation is one bad request field: a google.rpc.BadRequest.FieldViolation on the wire.
type FieldViolation struct {
	// Field is the field's path, in the convention of the package doc.
	Field string
	// Description says what is wrong with it, as the rest of a sentence that starts with the
	// field's name ("must be a UUID, got \"x\"").
	Description string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	msg := e.Field + ": " + e.Msg
	for _, v := range e.More {
		msg += "; " + v.Field + ": " + v.Description
	}
	return msg
}

// Violations returns the bad fields e reports, in order: none when it names no field.
func (e *Error) Violations() []FieldViolation {
	if e.Field == "" {
		return nil
	}
	return append([]FieldViolation{{Field: e.Field, Description: e.Msg}}, e.More...)
}

func newf(code connect.Code, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// InvalidArgument reports a bad request field; the message starts with the field's name, and the
// field travels as a BadRequest field violation. field follows the package doc's convention.
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

// ResourceExhausted reports a bound reached (a cap, a rate); the caller may retry later.
func ResourceExhausted(format string, args ...any) error {
	return newf(connect.CodeResourceExhausted, format, args...)
}

// Unavailable reports a dependency that cannot answer now (an identity provider, say); the
// caller may retry later.
func Unavailable(format string, args ...any) error {
	return newf(connect.CodeUnavailable, format, args...)
}

// Unauthenticated reports a missing, malformed, unknown or expired credential.
func Unauthenticated(format string, args ...any) error {
	return newf(connect.CodeUnauthenticated, format, args...)
}

// ToConnect converts err for the wire. internal is true when the error is unexpected: the caller
// then sees only a generic message with the request id, and the server should log err. An
// *Error that names fields carries them as a google.rpc.BadRequest detail. pgx.ErrNoRows is
// unexpected here: handlers that expect it turn it into NotFound themselves.
func ToConnect(err error, requestID string) (cerr *connect.Error, internal bool) {
	var ae *Error
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &ae):
		return ae.toConnect(), false
	case errors.As(err, &cerr):
		return cerr, false
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

// toConnect is e on the wire: its code and message, and its bad fields as a BadRequest detail.
func (e *Error) toConnect() *connect.Error {
	cerr := connect.NewError(e.Code, errors.New(e.Error()))
	vs := e.Violations()
	if len(vs) == 0 {
		return cerr
	}
	br := &errdetails.BadRequest{FieldViolations: make([]*errdetails.BadRequest_FieldViolation, len(vs))}
	for i, v := range vs {
		br.FieldViolations[i] = &errdetails.BadRequest_FieldViolation{Field: v.Field, Description: v.Description}
	}
	// NewErrorDetail only fails to marshal a message it cannot encode; a BadRequest of strings
	// always encodes, and without the detail the message still names the fields.
	if d, err := connect.NewErrorDetail(br); err == nil {
		cerr.AddDetail(d)
	}
	return cerr
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
// other errors pass through unchanged. Handlers call it where a missing row means a missing (or
// invisible) object: ToConnect maps no "no rows" to NotFound by itself.
func NotFoundIfNoRows(err error, format string, args ...any) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return NotFound(format, args...)
	}
	return err
}

// FailedPreconditionField reports a request field whose value cannot be met by the current
// state (a pool too small for the lease, a window taken by a reservation); like InvalidArgument,
// the field travels as a BadRequest field violation.
func FailedPreconditionField(field, format string, args ...any) error {
	return &Error{Code: connect.CodeFailedPrecondition, Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Join reports the results of validating several fields of one request as one error, so a
// caller learns of every bad field at once instead of one per attempt. It returns nil when every
// err is nil; the first non-nil err that is not an *Error naming a field, unchanged (an
// unexpected error is not hidden among bad fields); the first non-nil err when their codes
// differ; and otherwise one *Error of their code with all their field violations, in order.
func Join(errs ...error) error {
	var all []FieldViolation
	var first *Error
	var firstErr error
	var mixed bool
	for _, err := range errs {
		if err == nil {
			continue
		}
		var ae *Error
		if !errors.As(err, &ae) || ae.Field == "" {
			return err
		}
		if first == nil {
			first, firstErr = ae, err
		}
		mixed = mixed || ae.Code != first.Code
		all = append(all, ae.Violations()...)
	}
	switch {
	case first == nil:
		return nil
	case mixed || len(all) == 1:
		return firstErr
	}
	return &Error{Code: first.Code, Field: all[0].Field, Msg: all[0].Description, More: all[1:]}
}
