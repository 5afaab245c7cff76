package bucket

import (
	"testing"
	"time"
)

func TestSamplerLetsMostThroughAnInterval(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	s := NewSampler(3, time.Minute)
	s.now = c.now
	passed := 0
	for range 100 {
		if ok, _ := s.Take(); ok {
			passed++
		}
	}
	if passed != 3 {
		t.Fatalf("%d of 100 passed in one interval, want 3", passed)
	}
	c.add(time.Minute)
	ok, suppressed := s.Take()
	if !ok || suppressed != 97 {
		t.Fatalf("next interval: ok %v, suppressed %d; want true, 97", ok, suppressed)
	}
}
