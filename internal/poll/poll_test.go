package poll_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/poll"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	took := poll.Until(t, 5*time.Second, "the third call", func() bool { return calls.Add(1) >= 3 }, poll.Every(time.Millisecond))
	if calls.Load() != 3 {
		t.Fatalf("cond called %d times, want 3", calls.Load())
	}
	if took <= 0 || took > 5*time.Second {
		t.Fatalf("took %v", took)
	}
}

func TestUntilChecksAtOnce(t *testing.T) {
	t.Parallel()
	if took := poll.Until(t, time.Hour, "true", func() bool { return true }, poll.Every(time.Hour)); took > time.Second {
		t.Fatalf("took %v for a condition that held at once", took)
	}
}

// recorder is a testing.TB that records Fatalf instead of ending the test.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = format
	if len(args) > 0 {
		r.msg = "failed"
	}
	for _, a := range args {
		if s, ok := a.(string); ok {
			r.msg += " " + s
		}
	}
}

func TestUntilFailsWithWhatAndTheReport(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	poll.Until(r, 20*time.Millisecond, "never", func() bool { return false }, poll.Report(func() string { return "last state" }))
	if r.msg != "failed never last state" {
		t.Fatalf("failure message %q, want it to name the wait and carry the report", r.msg)
	}
}
