package bucket

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// clock is a settable time for the buckets.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestBucketAllowsBurstThenRate(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	l := newLimiter(Limit{Rate: 2, Burst: 3}, 100, c.now)
	for i := range 3 {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatalf("call %d of the burst refused", i+1)
		}
	}
	ok, wait := l.Allow("a")
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("4th call: ok %v, wait %s; want refused, 500ms", ok, wait)
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Fatal("another key shares the first key's bucket")
	}
	c.add(500 * time.Millisecond)
	if ok, _ := l.Allow("a"); !ok {
		t.Fatal("no token after the wait Allow gave")
	}
	if ok, _ := l.Allow("a"); ok {
		t.Fatal("a second token after half a second at 2 a second")
	}
	c.add(time.Hour)
	for i := range 3 {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatalf("after an idle hour, call %d refused: the bucket refills only to its burst", i+1)
		}
	}
	if ok, _ := l.Allow("a"); ok {
		t.Fatal("an idle hour saved more than the burst")
	}
}

func TestDisabledLimitAllowsEverything(t *testing.T) {
	t.Parallel()
	for _, lim := range []Limit{{}, {Rate: 0, Burst: 10}, {Rate: 5, Burst: 0}} {
		l := New(lim, 100)
		if l != nil {
			t.Errorf("New(%+v) = %v, want nil", lim, l)
		}
		for range 1000 {
			if ok, _ := l.Allow("x"); !ok {
				t.Fatalf("nil limiter refused a call")
			}
		}
	}
}

// TestCyclingKeysDoesNotGrowTheLimiter: an attacker taking a new address for every call evicts
// buckets; the limiter never holds more than its bound.
func TestCyclingKeysDoesNotGrowTheLimiter(t *testing.T) {
	t.Parallel()
	const maxKeys = 160
	l := New(Limit{Rate: 1, Burst: 1}, maxKeys)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 20_000 {
				l.Allow(fmt.Sprintf("10.%d.%d.%d", w, i/256, i%256))
			}
		})
	}
	wg.Wait()
	if n := l.Len(); n > maxKeys || n == 0 {
		t.Fatalf("limiter holds %d buckets, want 1 to %d", n, maxKeys)
	}
	// The most recent key is still limited: eviction takes the least recently used.
	l.Allow("recent")
	if ok, _ := l.Allow("recent"); ok {
		t.Fatal("a bucket just used was evicted")
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]int{0: 1, time.Millisecond: 1, time.Second: 1, 1001 * time.Millisecond: 2, 90 * time.Second: 90} {
		if got := RetryAfterSeconds(d); got != want {
			t.Errorf("RetryAfterSeconds(%s) = %d, want %d", d, got, want)
		}
	}
}

func TestAddressKeyGroupsIPv6By64(t *testing.T) {
	t.Parallel()
	a := AddressKey(netip.MustParseAddr("2001:db8:1:2:aaaa::1"))
	b := AddressKey(netip.MustParseAddr("2001:db8:1:2:bbbb::7"))
	c := AddressKey(netip.MustParseAddr("2001:db8:1:3::1"))
	if a != b || a == c {
		t.Errorf("keys %q %q %q: want the first two equal (one /64) and the third different", a, b, c)
	}
	if k := AddressKey(netip.MustParseAddr("203.0.113.5")); k != "203.0.113.5" {
		t.Errorf("IPv4 key %q", k)
	}
	if k := AddressKey(netip.Addr{}); k != "unknown" {
		t.Errorf("invalid address key %q", k)
	}
}

func TestRefundGivesATokenBack(t *testing.T) {
	t.Parallel()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	l := newLimiter(Limit{Rate: 0.001, Burst: 2}, 100, c.now)
	for range 10 {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatal("a call whose token was refunded was refused")
		}
		l.Refund("a")
	}
	l.Refund("a") // never past the burst
	for i := range 3 {
		if ok, _ := l.Allow("a"); ok != (i < 2) {
			t.Fatalf("call %d: allowed %v", i+1, ok)
		}
	}
}
