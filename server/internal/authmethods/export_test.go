package authmethods

// RedirectAllowed is redirectAllowed, for the tests.
var RedirectAllowed = redirectAllowed

// ReturnPath is returnPath, for the tests.
var ReturnPath = returnPath
