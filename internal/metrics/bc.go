package metrics

import (
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// API records the API's calls: bc_api_requests_total{method,code} and
// bc_api_request_duration_seconds{method}. A nil *API records nothing.
type API struct {
	requests *CounterVec
	latency  *HistogramVec

	mu    sync.RWMutex
	calls map[apiKey]apiSeries
}

type apiKey struct{ group, name, code string }

type apiSeries struct {
	requests *Counter
	latency  *Histogram
}

// NewAPI returns the API's instruments in r (the same ones on every call with r), or nil when r
// is nil.
func NewAPI(r *Registry) *API {
	if r == nil {
		return nil
	}
	return set(r, "api", func() *API {
		return &API{
			requests: r.Counter("bc_api_requests_total",
				"API calls finished, by method (group/name, or unknown) and Connect code (ok on success).", "method", "code"),
			latency: r.Histogram("bc_api_request_duration_seconds",
				"Time from the guard admitting an API call to its answer, by method.", DurationBuckets, "method"),
			calls: map[apiKey]apiSeries{},
		}
	})
}

// Observe records one call of the method group/name ("" for a procedure outside the registry)
// that ended with code after d. It does not allocate once the method and code have been seen.
func (a *API) Observe(group, name, code string, d time.Duration) {
	if a == nil {
		return
	}
	k := apiKey{group, name, code}
	a.mu.RLock()
	s, ok := a.calls[k]
	a.mu.RUnlock()
	if !ok {
		method := "unknown"
		if group != "" {
			method = group + "/" + name
		}
		s = apiSeries{a.requests.With(method, code), a.latency.With(method)}
		a.mu.Lock()
		a.calls[k] = s
		a.mu.Unlock()
	}
	s.requests.Inc()
	s.latency.ObserveDuration(d)
}

// Gateway records a gateway's sessions (bc_gateway_sessions), its open tunnels
// (bc_gateway_tunnels) and the latency of command dispatch (bc_gateway_dispatch_latency_seconds).
// A nil *Gateway records nothing.
type Gateway struct {
	dispatch *Histogram
	// refused counts bc_gateway_anonymous_refusals_total{reason}: connections and calls without
	// a client certificate that the gateway refused (no label names an address).
	refused *CounterVec
	// ignored counts bc_gateway_ignored_messages_total{kind}: session messages a daemon sent
	// that this gateway accepts and does not store yet (gpu_usage).
	ignored *CounterVec

	mu       sync.Mutex
	sessions []func() int
	tunnels  []func() int
}

// DispatchBuckets are the dispatch latency buckets in seconds: a poked dispatch takes
// milliseconds, a dispatch from the loop up to its period, a backlog or a retry longer.
var DispatchBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2, 5, 10, 30, 60, 300}

// NewGateway returns the gateway instruments in r (the same ones on every call with r), or nil
// when r is nil.
func NewGateway(r *Registry) *Gateway {
	if r == nil {
		return nil
	}
	return set(r, "gateway", func() *Gateway {
		g := &Gateway{
			dispatch: r.Histogram("bc_gateway_dispatch_latency_seconds",
				"Time from a command's creation to its dispatch to the node's session (both database clock).", DispatchBuckets).With(),
			refused: r.Counter("bc_gateway_anonymous_refusals_total",
				"Connections and calls without a client certificate that the gateway refused, by reason (a cap, the join rate, the read timeout, or a refused call).", "reason"),
			ignored: r.Counter("bc_gateway_ignored_messages_total",
				"Session messages from daemons that the gateway accepted and did not store, by kind (gpu_usage: not stored yet).", "kind"),
		}
		r.GaugeFunc("bc_gateway_sessions", "Daemon sessions this process's gateway holds.", func() float64 { return g.sum(&g.sessions) })
		r.GaugeFunc("bc_gateway_tunnels", "Tunnels this process's gateway relays.", func() float64 { return g.sum(&g.tunnels) })
		return g
	})
}

// CountSessions adds a gateway's session count to bc_gateway_sessions.
func (g *Gateway) CountSessions(f func() int) {
	if g != nil {
		g.add(&g.sessions, f)
	}
}

// CountTunnels adds a gateway's open tunnel count to bc_gateway_tunnels.
func (g *Gateway) CountTunnels(f func() int) {
	if g != nil {
		g.add(&g.tunnels, f)
	}
}

func (g *Gateway) add(to *[]func() int, f func() int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	*to = append(*to, f)
}

func (g *Gateway) sum(of *[]func() int) float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, f := range *of {
		n += f()
	}
	return float64(n)
}

// RefuseAnonymous counts one refusal of traffic without a client certificate.
func (g *Gateway) RefuseAnonymous(reason string) {
	if g == nil {
		return
	}
	g.refused.With(reason).Inc()
}

// IgnoreMessage counts one session message of kind (its oneof case: gpu_usage) that the
// gateway accepted and did not store.
func (g *Gateway) IgnoreMessage(kind string) {
	if g == nil {
		return
	}
	g.ignored.With(kind).Inc()
}

// ObserveDispatch records the latency of one dispatched command.
func (g *Gateway) ObserveDispatch(d time.Duration) {
	if g == nil {
		return
	}
	g.dispatch.ObserveDuration(d)
}

// RegisterPool adds the connection pool's statistics, read at scrape time: bc_db_pool_*. Only
// the first call on a registry counts.
func RegisterPool(r *Registry, pool *pgxpool.Pool) {
	set(r, "pool", func() bool {
		stat := func(f func(*pgxpool.Stat) float64) func(Emit) {
			return func(emit Emit) { emit(f(pool.Stat())) }
		}
		r.Func("bc_db_pool_connections", "Connections of the database pool, by state (acquired, idle, constructing).",
			TypeGauge, []string{"state"}, func(emit Emit) {
				s := pool.Stat()
				emit(float64(s.AcquiredConns()), "acquired")
				emit(float64(s.IdleConns()), "idle")
				emit(float64(s.ConstructingConns()), "constructing")
			})
		r.Func("bc_db_pool_max_connections", "The most connections the database pool opens.", TypeGauge, nil,
			stat(func(s *pgxpool.Stat) float64 { return float64(s.MaxConns()) }))
		r.Func("bc_db_pool_acquires_total", "Connections acquired from the database pool.", TypeCounter, nil,
			stat(func(s *pgxpool.Stat) float64 { return float64(s.AcquireCount()) }))
		r.Func("bc_db_pool_empty_acquires_total", "Acquires that waited because the database pool had no idle connection.", TypeCounter, nil,
			stat(func(s *pgxpool.Stat) float64 { return float64(s.EmptyAcquireCount()) }))
		r.Func("bc_db_pool_acquire_wait_seconds_total", "Time spent acquiring connections from the database pool.", TypeCounter, nil,
			stat(func(s *pgxpool.Stat) float64 { return s.AcquireDuration().Seconds() }))
		return true
	})
}
