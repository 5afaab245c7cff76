package authmethods

// RedirectAllowed is redirectAllowed, for the tests.
var RedirectAllowed = redirectAllowed
