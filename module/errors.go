package module

import (
	"github.com/google/uuid"

	"github.com/better-compute/better-compute/internal/apierr"
)

// A module's handlers return these, as the core's do: the API's guard turns them into Connect
// errors with the right code, and field problems into a google.rpc.BadRequest detail naming the
// field (its proto name, snake_case). Any other error is an internal error: logged with the
// request id, and the caller told only that id.

// InvalidArgument says what is wrong with one field of the request.
func InvalidArgument(field, format string, args ...any) error {
	return apierr.InvalidArgument(field, format, args...)
}

// NotFound says that what the request names does not exist (or is not the caller tenant's).
func NotFound(format string, args ...any) error { return apierr.NotFound(format, args...) }

// AlreadyExists says that what the request would create exists.
func AlreadyExists(format string, args ...any) error { return apierr.AlreadyExists(format, args...) }

// FailedPrecondition says that the state of the system refuses the request as it stands.
func FailedPrecondition(format string, args ...any) error {
	return apierr.FailedPrecondition(format, args...)
}

// NotFoundIfNoRows is NotFound when err is pgx.ErrNoRows, err otherwise (nil stays nil).
func NotFoundIfNoRows(err error, format string, args ...any) error {
	return apierr.NotFoundIfNoRows(err, format, args...)
}

// ParseID parses a UUID from a request field, or says the field is not one.
func ParseID(field, s string) (uuid.UUID, error) { return apierr.ParseID(field, s) }
