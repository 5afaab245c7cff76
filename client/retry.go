package client

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"math/rand/v2"
	"slices"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	apiv1 "github.com/better-compute/better-compute/gen/go/bettercompute/api/v1"
)

// RetryPolicy says how often and how soon a failed call is tried again. Only calls that are safe
// to repeat are retried: methods without side effects (idempotency_level NO_SIDE_EFFECTS in the
// .proto) and methods the API declares idempotent ((bettercompute.api.v1.method).idempotent),
// which the client sends with one Idempotency-Key for every attempt, so the server answers a
// repeat with the stored response instead of acting twice. Everything else is tried once.
type RetryPolicy struct {
	// MaxAttempts counts the first try; 1 turns retries off. 0 means 3.
	MaxAttempts int
	// InitialBackoff is the wait before the second attempt, doubled after each one up to
	// MaxBackoff, with up to 50% random jitter. 0 means 250 ms and 5 s.
	InitialBackoff, MaxBackoff time.Duration
	// Codes are the errors worth another try. Nil means Unavailable (which includes failing to
	// connect), ResourceExhausted and Aborted.
	Codes []connect.Code
	// MaxRetryAfter is the longest Retry-After the client waits for. A refusal with a
	// Retry-After (a rate limit or quota's resource_exhausted, an unavailable server) is retried
	// no sooner than it asks, not after the backoff; one that asks for longer than this, or
	// longer than the call's context has left, is returned at once, without another attempt.
	// 0 means 30 s.
	MaxRetryAfter time.Duration
}

// DefaultRetryPolicy is the policy of clients made without WithRetry.
var DefaultRetryPolicy = RetryPolicy{MaxAttempts: 3}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 3
	}
	if p.InitialBackoff <= 0 {
		p.InitialBackoff = 250 * time.Millisecond
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = 5 * time.Second
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = 30 * time.Second
	}
	if p.Codes == nil {
		p.Codes = []connect.Code{connect.CodeUnavailable, connect.CodeResourceExhausted, connect.CodeAborted}
	}
	return p
}

type idempotencyKey struct{}

// WithIdempotencyKey makes the idempotent call made with ctx send key as its Idempotency-Key,
// instead of a random one per call: reuse a key to make a call again after a crash without
// acting twice. Only methods the API declares idempotent take one.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, idempotencyKey{}, key)
}

// Retry says how a method may be retried.
type Retry int

const (
	// NotRetried methods have side effects and take no Idempotency-Key: they are tried once.
	NotRetried Retry = iota
	// RetriedFreely methods have no side effects.
	RetriedFreely
	// RetriedWithKey methods are idempotent given an Idempotency-Key.
	RetriedWithKey
)

// RetryOf reads how the method described by spec may be retried, from its protobuf options.
func RetryOf(spec connect.Spec) Retry {
	if spec.StreamType != connect.StreamTypeUnary {
		return NotRetried
	}
	if spec.IdempotencyLevel == connect.IdempotencyNoSideEffects || spec.IdempotencyLevel == connect.IdempotencyIdempotent {
		return RetriedFreely
	}
	if md, ok := spec.Schema.(protoreflect.MethodDescriptor); ok {
		if m, ok := proto.GetExtension(md.Options(), apiv1.E_Method).(*apiv1.Method); ok && m.GetIdempotent() {
			return RetriedWithKey
		}
	}
	return NotRetried
}

// interceptor sets the API's headers on every call and retries unary calls that are safe to
// retry.
type interceptor struct {
	apiKey string
	retry  RetryPolicy
	sleep  func(context.Context, time.Duration) error // waits between attempts; tests replace it
}

// newInterceptor is the interceptor of clients made with o.
func newInterceptor(o options) *interceptor {
	i := &interceptor{apiKey: o.apiKey, retry: o.retry.withDefaults(), sleep: o.sleep}
	if i.sleep == nil {
		i.sleep = sleep
	}
	return i
}

// sleep waits d, or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (i *interceptor) setHeaders(h interface{ Set(string, string) }) {
	h.Set(ClientHeader, "1")
	if i.apiKey != "" {
		h.Set("Authorization", "Bearer "+i.apiKey)
	}
}

func (i *interceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		i.setHeaders(req.Header())
		kind := RetryOf(req.Spec())
		if kind == RetriedWithKey {
			key, _ := ctx.Value(idempotencyKey{}).(string)
			if key == "" && i.retry.MaxAttempts > 1 {
				key = newIdempotencyKey()
			}
			if key != "" {
				req.Header().Set(IdempotencyKeyHeader, key)
			}
		}
		attempts := 1
		if kind != NotRetried {
			attempts = i.retry.MaxAttempts
		}
		backoff := i.retry.InitialBackoff
		for attempt := 1; ; attempt++ {
			res, err := next(ctx, req)
			if err == nil || attempt >= attempts || !slices.Contains(i.retry.Codes, connect.CodeOf(err)) || ctx.Err() != nil {
				return res, err
			}
			wait := backoff/2 + rand.N(backoff/2+1)
			if after, ok := RetryAfter(err); ok {
				if after > i.retry.MaxRetryAfter {
					return nil, err // the server asks for a longer wait than this client gives
				}
				wait = max(wait, after)
			}
			if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
				return nil, err // the next attempt could not come before the context ends
			}
			if i.sleep(ctx, wait) != nil {
				return nil, err
			}
			backoff = min(2*backoff, i.retry.MaxBackoff)
		}
	}
}

func (i *interceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		i.setHeaders(conn.RequestHeader())
		return conn
	}
}

func (i *interceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

func newIdempotencyKey() string {
	var b [16]byte
	_, _ = cryptorand.Read(b[:])
	return "go-" + hex.EncodeToString(b[:])
}
