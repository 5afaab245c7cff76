package secret

import "regexp"

// name is the syntax of secret names: that of label keys (and of NodeSpec.secrets).
var name = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._/-]{0,61}[A-Za-z0-9])?$`)

// ValidName reports whether s has the syntax of a secret name (that of label keys): the API
// refuses other names, and the gateway refuses to look them up.
func ValidName(s string) bool { return name.MatchString(s) }
