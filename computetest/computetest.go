// Package computetest is for the tests of programs that embed Better Compute (package compute)
// or carry modules of their own: each test gets a PostgreSQL database of its own, on a private
// cluster the test binary starts (or the server BETTER_COMPUTE_TEST_DATABASE_URL names), never a
// mock. BETTER_COMPUTE_POSTGRES=fetch runs the pinned PostgreSQL 17, downloaded once into the
// user cache, on a machine without one.
package computetest

import (
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/poll"
)

// Main runs the package's tests and then stops the private cluster, if one started. A test
// package that uses DatabaseURL calls it from TestMain:
//
//	func TestMain(m *testing.M) { computetest.Main(m) }
func Main(m *testing.M) { dbtest.Main(m) }

// DatabaseURL is the URL of a fresh, empty database, dropped when the test ends: what a
// deployment's Migrate starts from.
func DatabaseURL(t testing.TB) string {
	t.Helper()
	return dbtest.EmptyURL(t)
}

// Until polls cond until it holds, failing the test with what after timeout: how a test waits
// for the control plane's asynchronous work (a reconciler's write, a role's start) without
// sleeping for a guessed time.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, timeout, what, cond)
}
