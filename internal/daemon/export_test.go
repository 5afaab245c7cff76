package daemon

// OuterPinned is outerPinned, for the external tests.
var OuterPinned = outerPinned
