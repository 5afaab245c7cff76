package metrics

// Refusals counts the API calls refused before anyone is accountable for them, which leave no
// audit row: bc_api_anonymous_refusals_total{code} (calls without an authenticated principal
// that were refused) and bc_api_rate_limited_total{bucket} (calls refused by a token bucket,
// bucket "address" or "key", or "expensive": one expensive call too many of a tenant at once).
// No label names a tenant, key or address. A nil *Refusals records
// nothing.
type Refusals struct {
	anonymous *CounterVec
	limited   *CounterVec
}

// Rate-limit buckets, the values of bc_api_rate_limited_total's bucket label.
const (
	BucketAddress = "address"
	BucketKey     = "key"
	// BucketExpensive counts calls refused for being over rateLimits.expensiveCallsPerTenant.
	BucketExpensive = "expensive"
)

// NewRefusals returns the refusal counters in r (the same ones on every call with r), or nil
// when r is nil.
func NewRefusals(r *Registry) *Refusals {
	if r == nil {
		return nil
	}
	return set(r, "refusals", func() *Refusals {
		return &Refusals{
			anonymous: r.Counter("bc_api_anonymous_refusals_total",
				"API calls without an authenticated principal that were refused, by Connect code; they are not audited.", "code"),
			limited: r.Counter("bc_api_rate_limited_total",
				"API calls refused by a token bucket of this process, by bucket (address or key), or for a tenant's expensive calls at once (expensive).", "bucket"),
		}
	})
}

// Anonymous counts one refused anonymous call that ended with code.
func (x *Refusals) Anonymous(code string) {
	if x == nil {
		return
	}
	x.anonymous.With(code).Inc()
}

// RateLimited counts one call refused by bucket (BucketAddress, BucketKey or BucketExpensive).
func (x *Refusals) RateLimited(bucket string) {
	if x == nil {
		return
	}
	x.limited.With(bucket).Inc()
}
