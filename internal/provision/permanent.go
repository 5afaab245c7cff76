package provision

import "errors"

// PermanentError is a provider's refusal that trying again cannot change (parameters the
// provider rejects, a quota the account will not raise, a system that does not exist): the
// controller fails the machine with it as the reason instead of retrying. Every other error is
// retried with backoff.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }

func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent marks err as permanent; nil stays nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// IsPermanent reports whether err, or an error it wraps, is permanent.
func IsPermanent(err error) bool {
	_, ok := errors.AsType[*PermanentError](err)
	return ok
}
