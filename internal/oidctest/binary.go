package oidctest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Version is the release of github.com/zitadel/oidc whose example server the tests run (as
// deviceop, built by scripts/setup against that release).
const Version = "v3.52.0"

// Environment variables that locate or require the server's binary.
const (
	// RequireEnv, set to 1, makes a missing binary fail the test instead of skipping it, so CI
	// cannot pass by silently skipping the sign-in tests.
	RequireEnv = "BETTER_COMPUTE_REQUIRE_OIDC"
	// DeviceBinaryEnv names deviceop's binary, replacing the search of the caches.
	DeviceBinaryEnv = "BETTER_COMPUTE_OIDC_DEVICE_SERVER"
)

// binary is one of the provider's builds that scripts/setup installs.
type binary struct {
	name string // the file's name in the cache's bin directory
	env  string // the variable that names it instead
	hint string // how to install it
}

// deviceBinary is the provider every test runs: the example server, listening on loopback only,
// with the device client when Options.Device asks for it.
var deviceBinary = binary{name: "deviceop", env: DeviceBinaryEnv, hint: deviceSetupHint}

// deviceSetupHint says how to get deviceop's binary.
const deviceSetupHint = "run scripts/setup, which builds internal/oidctest/deviceop (a module of its own) into <cache>/zitadel-oidc-" +
	Version + "/bin/deviceop"

// cacheDirs are where scripts/setup may have installed the binary, in the order looked at: the
// user's cache (as a non-root setup installs it) and the system's (as a root setup does), the
// same places internal/pgcluster keeps its fetched PostgreSQL builds.
func cacheDirs() []string {
	var dirs []string
	if cache, err := os.UserCacheDir(); err == nil {
		dirs = append(dirs, filepath.Join(cache, "better-compute"))
	}
	return append(dirs, "/var/cache/better-compute")
}

// findBinary returns b's binary: the one its variable names, else the first installed by
// scripts/setup. A missing binary skips the test with how to install it, or fails it when
// RequireEnv is set.
func findBinary(t testing.TB, b binary) string {
	t.Helper()
	if p := os.Getenv(b.env); p != "" {
		if isExecutable(p) {
			return p
		}
		t.Fatalf("oidctest: %s=%s is not an executable file", b.env, p)
	}
	var looked []string
	for _, d := range cacheDirs() {
		p := filepath.Join(d, "zitadel-oidc-"+Version, "bin", b.name)
		if isExecutable(p) {
			return p
		}
		looked = append(looked, p)
	}
	msg := "the OpenID provider " + b.name + " is not installed (looked at " +
		strings.Join(looked, ", ") + "): " + b.hint
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("oidctest: %s (%s=1 requires it)", msg, RequireEnv)
	}
	t.Skip("oidctest: " + msg)
	return ""
}

func isExecutable(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}
