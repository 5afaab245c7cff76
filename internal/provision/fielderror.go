package provision

// FieldError is a factory's refusal of one parameter of a class, named by its path in the
// parameters ("endpoints[0]", "endpoint"), so that the API can name the field it refuses.
type FieldError struct {
	// Field is the parameter's path.
	Field string
	// Err says what is wrong with it.
	Err error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *FieldError) Unwrap() error { return e.Err }
