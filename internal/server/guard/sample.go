package guard

import (
	"sync"
	"time"
)

// The log lines of refused anonymous calls are sampled: at most anonymousLogLines an
// anonymousLogInterval, so that a flood of them cannot flood the log (the metric
// bc_api_anonymous_refusals_total counts every one).
const (
	anonymousLogLines    = 10
	anonymousLogInterval = time.Minute
)

// sampler lets at most most events an interval through, counting the rest.
type sampler struct {
	most  int
	every time.Duration
	now   func() time.Time

	mu         sync.Mutex
	start      time.Time
	taken      int
	suppressed int
}

func newSampler(most int, every time.Duration) *sampler {
	return &sampler{most: most, every: every, now: time.Now}
}

// take reports whether this event may be logged and, when it may, how many were suppressed
// since the last one that was.
func (s *sampler) take() (ok bool, suppressed int) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.start) >= s.every {
		s.start, s.taken = now, 0
	}
	if s.taken >= s.most {
		s.suppressed++
		return false, 0
	}
	s.taken++
	suppressed, s.suppressed = s.suppressed, 0
	return true, suppressed
}
