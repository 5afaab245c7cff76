// Package guard is the interceptor every API call passes through. In order, it finds the method
// in the registry, takes a token from the client address's bucket, refuses JSON calls without
// the X-Better-Compute header (a CSRF guard), authenticates the caller, takes a token from the
// API key's bucket, authorizes the method's permission through the IAM bridge, takes one of
// the tenant's slots for expensive methods (given back when the call ends), checks the
// Idempotency-Key header, and afterwards turns any error into a Connect error in one place, logs
// the call, counts it in the API metrics and records an authenticated principal's failed
// mutations in the audit log. Refused calls without a principal leave no audit row: they are
// counted (bc_api_anonymous_refusals_total) and logged a few a minute.
package guard

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/limit/bucket"
	"github.com/better-compute/better-compute/internal/metrics"
	"github.com/better-compute/better-compute/internal/quota"
	"github.com/better-compute/better-compute/internal/ratelimit"
	"github.com/better-compute/better-compute/internal/registry"
	"github.com/better-compute/better-compute/internal/requestid"
)

// Header names the API reads.
const (
	// ClientHeader must be "1" on JSON calls to non-public methods. A browser cannot send it
	// cross-origin without a CORS preflight, which the server only grants to configured origins.
	ClientHeader = "X-Better-Compute"
	// IdempotencyKeyHeader makes a retried call of an idempotent method return the stored
	// response instead of acting twice.
	IdempotencyKeyHeader = "Idempotency-Key"
)

// Call is what the guard learned about a call, for the handlers and the admission layer.
type Call struct {
	Method    *registry.Method
	RequestID string
	// Principal is nil for unauthenticated calls of public methods.
	Principal *auth.Principal
	// Client is the bucket key of the call's client address (ratelimit.AddressKey of the
	// address the trusted-proxy rules name): what the public sign-in starts bound their flows by.
	Client string
	// IdempotencyKey is the caller's Idempotency-Key, "" when none was sent.
	IdempotencyKey string
	// Admitted is set by the admission layer when it committed the call's change with its
	// audit row; Replayed when it answered from a stored idempotent response instead.
	Admitted, Replayed bool

	// release gives back the call's slot of its tenant's expensive calls; nil when it took none.
	release func()
}

type callKey struct{}

// CallFrom returns the call being served.
func CallFrom(ctx context.Context) (*Call, bool) {
	c, ok := ctx.Value(callKey{}).(*Call)
	return c, ok
}

// Guard is the interceptor. Install it on every API handler.
type Guard struct {
	registry *registry.Registry
	bridge   auth.Bridge
	pool     *pgxpool.Pool
	log      *slog.Logger
	metrics  *metrics.API

	// Token buckets (nil: no limit), the proxies trusted to name the client, and the tenant caps
	// attached to every call; see WithRateLimits.
	byAddress, byKey *ratelimit.Limiter
	proxies          ratelimit.Proxies
	tenantLimits     quota.Limits
	refusals         *metrics.Refusals
	anonymousLog     *bucket.Sampler
	// expensive bounds each tenant's expensive calls at once (nil: no bound); see WithRateLimits.
	expensive *tenantSlots
}

var _ connect.Interceptor = (*Guard)(nil)

// New returns a guard for the methods of reg, deciding through bridge and recording failed
// mutations in pool's audit log.
func New(reg *registry.Registry, bridge auth.Bridge, pool *pgxpool.Pool, log *slog.Logger) *Guard {
	return &Guard{registry: reg, bridge: bridge, pool: pool, log: log,
		anonymousLog: bucket.NewSampler(anonymousLogLines, anonymousLogInterval)}
}

// WithMetrics makes the guard count every call it finishes, by method and code, and time it.
func (g *Guard) WithMetrics(m *metrics.API) *Guard {
	g.metrics = m
	return g
}

// WrapUnary guards unary calls.
func (g *Guard) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if req.Spec().IsClient {
			return next(ctx, req)
		}
		start := time.Now()
		ctx, call, err := g.admit(ctx, req.Spec().Procedure, req.Header(), req.Peer())
		if err == nil {
			err = checkText(req.Any())
		}
		var res connect.AnyResponse
		if err == nil {
			res, err = next(ctx, req)
		}
		if err = g.finish(ctx, call, err, start); err != nil {
			return nil, err
		}
		return res, nil
	}
}

// WrapStreamingClient leaves outgoing streams alone.
func (g *Guard) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler guards streaming calls like unary ones.
func (g *Guard) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		start := time.Now()
		ctx, call, err := g.admit(ctx, conn.Spec().Procedure, conn.RequestHeader(), conn.Peer())
		if err == nil {
			err = next(ctx, conn)
		}
		return g.finish(ctx, call, err, start)
	}
}

func (g *Guard) admit(ctx context.Context, procedure string, h http.Header, peer connect.Peer) (context.Context, *Call, error) {
	call := &Call{RequestID: requestid.From(ctx)}
	ctx = context.WithValue(ctx, callKey{}, call)
	ctx = quota.WithLimits(ctx, g.tenantLimits)
	m, ok := g.registry.ByProcedure(procedure)
	if !ok {
		return ctx, call, apierr.PermissionDenied("%s is not in the method registry", procedure)
	}
	call.Method = m
	call.Client = g.clientKey(h, peer)
	if err := g.limitAddress(call.Client); err != nil {
		return ctx, call, err
	}
	if m.Public {
		return ctx, call, nil
	}
	if isJSON(h, peer) && h.Get(ClientHeader) != "1" {
		return ctx, call, apierr.InvalidArgument(ClientHeader+" header",
			"JSON calls must send \"%s: 1\" (it guards against cross-site requests)", ClientHeader)
	}
	p, err := g.bridge.Authenticate(ctx, h)
	if err != nil {
		return ctx, call, err
	}
	if p == nil {
		return ctx, call, apierr.Unauthenticated("%s/%s needs an API key: send \"Authorization: Bearer <key>\"", m.Group, m.Name)
	}
	call.Principal = p
	ctx = auth.WithPrincipal(ctx, p)
	if err := g.limitKey(p); err != nil {
		return ctx, call, err
	}
	if err := g.bridge.Authorize(ctx, p, m.Permission); err != nil {
		return ctx, call, err
	}
	if err := g.limitExpensive(call); err != nil {
		return ctx, call, err
	}
	if key := h.Get(IdempotencyKeyHeader); key != "" {
		if !m.Idempotent {
			return ctx, call, apierr.InvalidArgument(IdempotencyKeyHeader+" header", "%s/%s is not idempotent and does not take one", m.Group, m.Name)
		}
		if !validKey(key) {
			return ctx, call, apierr.InvalidArgument(IdempotencyKeyHeader+" header", "must be 1 to 255 printable ASCII characters")
		}
		call.IdempotencyKey = key
	}
	return ctx, call, nil
}

// finish converts err for the wire, logs and counts the call and records a failed mutation.
func (g *Guard) finish(ctx context.Context, call *Call, err error, start time.Time) error {
	if call.release != nil {
		call.release()
	}
	m := call.Method
	if err == nil && m != nil && m.Audit && !call.Admitted && !call.Replayed {
		err = fmt.Errorf("%s is audited but its handler did not go through admission", m.Procedure)
	}
	elapsed := time.Since(start)
	var group, name string
	if m != nil {
		group, name = m.Group, m.Name
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String("better_compute.request_id", call.RequestID))
		if m != nil {
			span.SetAttributes(attribute.String("better_compute.method", group+"/"+name))
		}
	}
	attrs := []slog.Attr{
		slog.String("request_id", call.RequestID),
		slog.Duration("duration", elapsed),
	}
	if m != nil {
		attrs = append(attrs, slog.String("method", group+"/"+name))
	}
	if p := call.Principal; p != nil {
		attrs = append(attrs, slog.String("principal_id", p.ID.String()), slog.String("tenant_id", p.TenantID.String()))
	}
	if err == nil {
		g.metrics.Observe(group, name, "ok", elapsed)
		g.log.LogAttrs(ctx, slog.LevelDebug, "call", append(attrs, slog.String("code", "ok"))...)
		return nil
	}
	cerr, internal := apierr.ToConnect(err, call.RequestID)
	code := cerr.Code().String()
	g.metrics.Observe(group, name, code, elapsed)
	attrs = append(attrs, slog.String("code", code))
	switch {
	case internal:
		g.log.LogAttrs(ctx, slog.LevelError, "call failed", append(attrs, slog.String("err", err.Error()))...)
	case call.Principal == nil:
		// Anyone can send these, as fast as they like: count every one, log a sample.
		g.refusals.Anonymous(code)
		if ok, suppressed := g.anonymousLog.Take(); ok {
			g.log.LogAttrs(ctx, slog.LevelInfo, "anonymous call refused", append(attrs,
				slog.String("err", cerr.Message()), slog.Int("suppressed_since_last", suppressed))...)
		}
	default:
		g.log.LogAttrs(ctx, slog.LevelInfo, "call refused", append(attrs, slog.String("err", cerr.Message()))...)
	}
	if m != nil && m.Audit && call.Principal != nil {
		g.auditFailure(ctx, call, code)
	}
	return cerr
}

// auditFailure records a mutating call of an authenticated principal that changed nothing
// (calls without a principal are counted and sampled in the log instead: anyone can send them,
// and a row each would let anyone grow the audit log). Its transaction, if any, has rolled back,
// so the row is written on its own; a failure to write it is logged, not returned, because the
// caller's answer is already decided.
func (g *Guard) auditFailure(ctx context.Context, call *Call, outcome string) {
	p := call.Principal
	params := db.InsertAuditEventParams{
		Method:    call.Method.Group + "/" + call.Method.Name,
		Outcome:   outcome,
		RequestID: call.RequestID,
		TenantID:  &p.TenantID, PrincipalID: &p.ID,
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := db.New(g.pool).InsertAuditEvent(actx, params); err != nil {
		g.log.ErrorContext(ctx, "write audit row", "request_id", call.RequestID, "err", err)
	}
}

// isJSON reports whether the call is encoded as JSON: Connect unary and streaming, gRPC and
// gRPC-Web with a JSON codec, and Connect GET requests with encoding=json.
func isJSON(h http.Header, peer connect.Peer) bool {
	return strings.Contains(strings.ToLower(h.Get("Content-Type")), "json") || peer.Query.Get("encoding") == "json"
}

func validKey(k string) bool {
	if len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}
