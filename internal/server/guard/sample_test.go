package guard

import (
	"testing"
	"time"
)

// TestSamplerLogsAtMostNAnInterval: a flood of refusals yields at most most lines an interval,
// and the first line of the next interval says how many were left out.
func TestSamplerLogsAtMostNAnInterval(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	s := newSampler(3, time.Minute)
	s.now = func() time.Time { return now }
	logged := 0
	for range 1000 {
		if ok, _ := s.take(); ok {
			logged++
		}
	}
	if logged != 3 {
		t.Fatalf("%d of 1000 logged in one interval, want 3", logged)
	}
	now = now.Add(time.Minute)
	ok, suppressed := s.take()
	if !ok || suppressed != 997 {
		t.Fatalf("first of the next interval: ok %v, suppressed %d; want true, 997", ok, suppressed)
	}
	if ok, suppressed := s.take(); !ok || suppressed != 0 {
		t.Fatalf("second of the next interval: ok %v, suppressed %d; want true, 0", ok, suppressed)
	}
}
