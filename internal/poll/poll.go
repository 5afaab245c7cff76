// Package poll waits, in tests, for something that happens asynchronously: a worker's write, a
// daemon's reconnect, a command's result. It is the one place a test waits, so every wait has a
// deadline, a description and the same failure message, and none sleeps for a fixed time.
package poll

import (
	"testing"
	"time"
)

// DefaultInterval is how often Until checks its condition unless told otherwise: short enough
// not to slow a test down, long enough not to busy-loop against the database.
const DefaultInterval = 10 * time.Millisecond

// Option adjusts one call of Until.
type Option func(*options)

type options struct {
	interval time.Duration
	report   func() string
}

// Every checks the condition every d instead of every DefaultInterval, for conditions that are
// expensive to check (a call through the API, a subprocess's output).
func Every(d time.Duration) Option { return func(o *options) { o.interval = d } }

// Report adds what report returns to the failure message, for the state that explains a
// timeout (a daemon's log, the last findings seen).
func Report(report func() string) Option { return func(o *options) { o.report = report } }

// Until checks cond at once and then every interval until it returns true, and returns how long
// that took. If cond is still false after within, or the test's context ends first, it fails the
// test with what: the thing the test was waiting for, as in "node n1 is ready". Call it from the
// test's goroutine (it calls t.Fatalf).
func Until(t testing.TB, within time.Duration, what string, cond func() bool, opts ...Option) time.Duration {
	t.Helper()
	o := options{interval: DefaultInterval}
	for _, opt := range opts {
		opt(&o)
	}
	start := time.Now()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(o.interval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			// One last look: the condition may have become true while we waited.
			if cond() {
				return time.Since(start)
			}
			fail(t, o, "timed out after %v waiting until %s", within, what)
			return time.Since(start)
		case <-t.Context().Done():
			fail(t, o, "test ended while waiting until %s", what)
			return time.Since(start)
		}
	}
	return time.Since(start)
}

func fail(t testing.TB, o options, format string, args ...any) {
	t.Helper()
	if o.report != nil {
		format += "\n%s"
		args = append(args, o.report())
	}
	t.Fatalf(format, args...)
}
