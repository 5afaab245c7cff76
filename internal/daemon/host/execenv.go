package host

import (
	"fmt"
	"slices"
	"strings"
)

// execEnvAllow are the variables an exec's payload may set besides the LC_* locale ones. None
// makes the dynamic loader, a shell or an interpreter load code (LD_*, BASH_ENV, ENV,
// PYTHONPATH, …), and PATH is fixed (ExecPath).
var execEnvAllow = []string{"LANG", "LANGUAGE", "NO_COLOR", "TZ"}

// checkExecEnv reports whether an exec's payload may set name to value: name one of
// execEnvAllow or LC_ and upper-case letters, value at most MaxEnvValue bytes of letters,
// digits and ._-+,:<>@=/ naming no file by itself (no leading '/', also after TZ's ':', no
// ".."), since glibc reads a locale or time zone named by a path from that path.
func checkExecEnv(name, value string) error {
	if !execEnvAllowed(name) {
		return fmt.Errorf("exec: env %q may not be set (PATH is fixed; allowed: %s and LC_*); not run", name, strings.Join(execEnvAllow, ", "))
	}
	bad := len(value) > MaxEnvValue || strings.HasPrefix(strings.TrimPrefix(value, ":"), "/") || strings.Contains(value, "..")
	for _, r := range value {
		ok := ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') || strings.ContainsRune("._-+,:<>@=/", r)
		bad = bad || !ok
	}
	if bad {
		return fmt.Errorf("exec: env %s: the value must be at most %d letters, digits and ._-+,:<>@=/, without a leading '/' or \"..\"; not run", name, MaxEnvValue)
	}
	return nil
}

// execEnvAllowed reports whether name is one of execEnvAllow or LC_ followed by upper-case
// letters (LC_ALL, LC_CTYPE, …).
func execEnvAllowed(name string) bool {
	if slices.Contains(execEnvAllow, name) {
		return true
	}
	rest, ok := strings.CutPrefix(name, "LC_")
	if !ok || rest == "" {
		return false
	}
	for _, r := range rest {
		if r < 'A' || r > 'Z' {
			return false
		}
	}
	return true
}
