// Package ratelimit is the API's rate limiting: the token buckets of internal/limit/bucket
// (shared with the gateway, which must not import the API) and the client address a call came
// from, behind trusted proxies (address.go). The API runs as several replicas and each keeps its
// own buckets, so a limit holds per API process.
package ratelimit

import (
	"net/netip"
	"time"

	"github.com/better-compute/better-compute/internal/limit/bucket"
)

// Limit is a token bucket's shape (bucket.Limit).
type Limit = bucket.Limit

// Limiter is a bounded set of token buckets by key (bucket.Limiter); a nil one allows everything.
type Limiter = bucket.Limiter

// New returns a limiter of limit keeping at most maxKeys buckets, or nil when limit is not
// enabled (bucket.New).
func New(limit Limit, maxKeys int) *Limiter { return bucket.New(limit, maxKeys) }

// RetryAfterSeconds renders a wait as the value of a Retry-After header (bucket.RetryAfterSeconds).
func RetryAfterSeconds(d time.Duration) int { return bucket.RetryAfterSeconds(d) }

// AddressKey is the bucket key of a client address, IPv6 by /64 (bucket.AddressKey).
func AddressKey(a netip.Addr) string { return bucket.AddressKey(a) }
