// Package bucket holds token buckets: one per key (a client address, an API key), refilled at a
// steady rate up to a burst, in memory of one process. The API's guard and the gateway's Join
// both use them (internal/ratelimit names them for the API). Each process keeps its own
// buckets, so a limit holds per process: behind a balancer that spreads calls over n replicas a
// caller gets up to n times the configured rate.
//
// Memory is bounded: a Limiter keeps at most a configured number of buckets, split over shards,
// each shard evicting its least recently used bucket to make room. A bucket unused long enough
// to have refilled is the same as a new one, so evicting it loses nothing; an attacker cycling
// through addresses only ever evicts buckets, never grows the map.
package bucket

import (
	"container/list"
	"hash/maphash"
	"math"
	"net/netip"
	"sync"
	"time"
)

// Limit is a token bucket's shape: Rate tokens a second, up to Burst saved. A call takes one
// token. A zero or negative Rate means no limit.
type Limit struct {
	// Rate is how many calls a second a key may make, sustained.
	Rate float64
	// Burst is how many calls a key may make at once after being idle; at least 1.
	Burst int
}

// Enabled reports whether the limit limits anything.
func (l Limit) Enabled() bool { return l.Rate > 0 && l.Burst >= 1 }

// shardCount splits the buckets so that concurrent calls seldom wait on one mutex.
const shardCount = 16

// Limiter is a bounded set of token buckets of one Limit, by key. It is safe for concurrent
// use; a nil *Limiter allows everything.
type Limiter struct {
	limit    Limit
	perShard int
	seed     maphash.Seed
	now      func() time.Time
	shards   [shardCount]shard
}

type shard struct {
	mu      sync.Mutex
	buckets map[string]*list.Element // of *bucket
	lru     list.List                // front: most recently used
}

type bucket struct {
	key    string
	tokens float64
	last   time.Time
}

// New returns a limiter of limit keeping at most maxKeys buckets (at least one per shard), or
// nil, which allows everything, when limit is not Enabled.
func New(limit Limit, maxKeys int) *Limiter {
	return newLimiter(limit, maxKeys, time.Now)
}

func newLimiter(limit Limit, maxKeys int, now func() time.Time) *Limiter {
	if !limit.Enabled() {
		return nil
	}
	l := &Limiter{limit: limit, perShard: max(1, maxKeys/shardCount), seed: maphash.MakeSeed(), now: now}
	for i := range l.shards {
		l.shards[i].buckets = make(map[string]*list.Element)
	}
	return l
}

// Allow takes a token from key's bucket. When the bucket is empty it returns false and how long
// until the next token.
func (l *Limiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	if l == nil {
		return true, 0
	}
	s := &l.shards[maphash.String(l.seed, key)%shardCount]
	now := l.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var b *bucket
	if e, found := s.buckets[key]; found {
		s.lru.MoveToFront(e)
		b = e.Value.(*bucket)
		elapsed := now.Sub(b.last).Seconds()
		if elapsed > 0 {
			b.tokens = math.Min(float64(l.limit.Burst), b.tokens+elapsed*l.limit.Rate)
			b.last = now
		}
	} else {
		for len(s.buckets) >= l.perShard {
			oldest := s.lru.Back()
			s.lru.Remove(oldest)
			delete(s.buckets, oldest.Value.(*bucket).key)
		}
		b = &bucket{key: key, tokens: float64(l.limit.Burst), last: now}
		s.buckets[key] = s.lru.PushFront(b)
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / l.limit.Rate * float64(time.Second))
	return false, max(wait, time.Millisecond)
}

// Len is how many buckets the limiter holds.
func (l *Limiter) Len() int {
	if l == nil {
		return 0
	}
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.buckets)
		s.mu.Unlock()
	}
	return n
}

// RetryAfterSeconds renders a wait as the value of a Retry-After header: whole seconds, rounded
// up, at least 1.
func RetryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}

// AddressKey is the bucket key of a client address: the address itself for IPv4, and its /64
// for IPv6, since one host commonly holds a whole /64 and could otherwise take a fresh bucket
// for every call. Unparsable addresses share one key.
func AddressKey(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "unknown"
	case a.Is4():
		return a.String()
	default:
		p, _ := a.WithZone("").Prefix(64)
		return p.String()
	}
}

// Refund gives back a token Allow took from key's bucket (up to its burst): for a limit that
// counts only the calls that turn out badly, taken before the work so that a flood is refused
// before it costs anything.
func (l *Limiter) Refund(key string) {
	if l == nil {
		return
	}
	s := &l.shards[maphash.String(l.seed, key)%shardCount]
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, found := s.buckets[key]; found {
		b := e.Value.(*bucket)
		b.tokens = math.Min(float64(l.limit.Burst), b.tokens+1)
	}
}
