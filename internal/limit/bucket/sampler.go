package bucket

import (
	"sync"
	"time"
)

// Sampler lets at most a number of events an interval through and counts the rest: how a server
// logs what anyone may cause as fast as they like (refused anonymous calls), so that a flood of
// them cannot flood the log. A nil *Sampler lets everything through.
type Sampler struct {
	most  int
	every time.Duration
	now   func() time.Time

	mu         sync.Mutex
	start      time.Time
	taken      int
	suppressed int
}

// NewSampler lets at most most events through every interval.
func NewSampler(most int, every time.Duration) *Sampler {
	return &Sampler{most: most, every: every, now: time.Now}
}

// Take reports whether this event may be logged and, when it may, how many were suppressed since
// the last one that was.
func (s *Sampler) Take() (ok bool, suppressed int) {
	if s == nil {
		return true, 0
	}
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
