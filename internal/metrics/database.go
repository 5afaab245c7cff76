package metrics

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
)

// DatabaseOptions configure the metrics read from the database at scrape time.
type DatabaseOptions struct {
	// TTL is how long one reading serves scrapes; 5s when zero. However often /metrics is
	// scraped, the database is read at most once per TTL.
	TTL time.Duration
	// Timeout bounds one reading; 5s when zero.
	Timeout time.Duration
	// OutboxCap is the most events counted behind each sink; 100000 when zero.
	OutboxCap int32
	Logger    *slog.Logger
	// Now is the clock, for tests; time.Now when nil.
	Now func() time.Time
	// ByTenant adds the series labelled by tenant and pool (bc_tenant_*), for a registry served
	// only to operators (metrics.listen): the API's own /metrics, which anyone who reaches the
	// API port may read, names no tenant.
	ByTenant bool
}

// RegisterDatabase adds the metrics read from pool at scrape time (the same database every
// process shares, so any process may serve them):
//
//   - bc_reconcile_queue_depth{kind}, bc_reconcile_queue_due{kind} and
//     bc_reconcile_queue_oldest_due_age_seconds{kind}: keys queued, keys due now, and how long the
//     oldest due key has waited. A kind seen once stays at 0 when its queue empties.
//   - bc_leases_held{holder}: live (unexpired) worker locks per holder (internal/locks; the
//     name predates their rename from leases and is kept for existing dashboards).
//   - bc_outbox_lag_events{sink} and bc_outbox_lag_seconds{sink}: events after each sink's cursor
//     that it will receive (counted up to OutboxCap), and the age of the oldest of them, by kind of
//     sink: the webhooks of every tenant are one "webhook" series, so no label identifies a tenant.
//   - bc_gpus{model,health}: GPUs by model and health (healthy, degraded, unhealthy) over the
//     whole fleet, missing ones included (gpus.proto).
//   - bc_gpu_signals{check}: the GPU health signals the daemons report now, by check (xid,
//     ecc_dbe, …; docs/gpus.md), from their last snapshots.
//   - bc_remediations{state,ladder}: remediations waiting, running, and ended in service (the
//     hardware not yet returned), by ladder (docs/remediation.md).
//   - bc_leased_gpu_utilization_percent{model} and bc_leased_gpu_active_ratio{model}: the leased
//     GPUs' mean utilisation and the share of their GPU-seconds that were active, over the last
//     five minutes the daemons reported (docs/gpus.md, "Utilisation per lease"); the same by
//     tenant, pool and model as bc_tenant_gpu_utilization_percent and bc_tenant_gpu_active_ratio,
//     with bc_tenant_idle_gpus (GPUs held but not active, on average over the five minutes),
//     only with DatabaseOptions.ByTenant: the tenant's and pool's ids are labels, what an
//     operator charges back, so only an endpoint that only operators reach has them.
//   - bc_idle_leases: placed leases their pools' idle policies found idle.
//   - bc_metrics_database_up: 1 when the last reading succeeded, and
//     bc_metrics_database_errors_total.
//
// A failed reading drops the series it would have refreshed rather than show stale values. Only
// the first call on a registry counts.
func RegisterDatabase(r *Registry, pool *pgxpool.Pool, opts DatabaseOptions) {
	set(r, "database", func() *dbCollector {
		if opts.TTL == 0 {
			opts.TTL = 5 * time.Second
		}
		if opts.Timeout == 0 {
			opts.Timeout = 5 * time.Second
		}
		if opts.OutboxCap == 0 {
			opts.OutboxCap = 100000
		}
		if opts.Logger == nil {
			opts.Logger = slog.New(slog.DiscardHandler)
		}
		if opts.Now == nil {
			opts.Now = time.Now
		}
		c := &dbCollector{q: db.New(pool), opts: opts, kinds: map[string]bool{}}
		c.errors = r.Counter("bc_metrics_database_errors_total", "Scrape-time database readings that failed.").With()
		r.OnScrape(c.refresh)
		r.Func("bc_metrics_database_up", "1 when the last scrape-time database reading succeeded, else 0.", TypeGauge, nil,
			func(emit Emit) {
				c.mu.Lock()
				defer c.mu.Unlock()
				if c.read {
					emit(boolFloat(c.ok))
				}
			})
		r.Func("bc_reconcile_queue_depth", "Keys in each reconciler kind's queue, due or not.", TypeGauge, []string{"kind"},
			c.queues(func(q db.ReconcileQueueStatsRow) float64 { return float64(q.Depth) }))
		r.Func("bc_reconcile_queue_due", "Keys of each reconciler kind that are due now.", TypeGauge, []string{"kind"},
			c.queues(func(q db.ReconcileQueueStatsRow) float64 { return float64(q.Due) }))
		r.Func("bc_reconcile_queue_oldest_due_age_seconds", "How long the oldest due key of each reconciler kind has waited (0 when none is due).",
			TypeGauge, []string{"kind"}, c.queues(func(q db.ReconcileQueueStatsRow) float64 { return q.OldestDueSeconds }))
		r.Func("bc_leases_held", "Live worker locks (shards and singleton jobs) per holder.", TypeGauge, []string{"holder"},
			func(emit Emit) {
				c.mu.Lock()
				defer c.mu.Unlock()
				for _, l := range c.locks {
					emit(float64(l.Locks), l.Holder)
				}
			})
		r.Func("bc_outbox_lag_events", "Events after the sinks' cursors that they will receive, counted up to a cap per sink, by kind of sink (log, webhook).", TypeGauge, []string{"sink"},
			c.outboxLag(func(o db.OutboxLagRow) float64 { return float64(o.Events) }, func(a, b float64) float64 { return a + b }))
		r.Func("bc_outbox_lag_seconds", "Age of the oldest event a sink has yet to receive (0 when caught up), by kind of sink (log, webhook).", TypeGauge, []string{"sink"},
			c.outboxLag(func(o db.OutboxLagRow) float64 { return o.OldestSeconds }, func(a, b float64) float64 { return max(a, b) }))
		r.Func("bc_gpus", "GPUs by model and health (healthy, degraded, unhealthy), missing ones included.", TypeGauge, []string{"model", "health"},
			func(emit Emit) {
				c.mu.Lock()
				defer c.mu.Unlock()
				for _, g := range c.gpus {
					emit(float64(g.Gpus), g.Model, g.Health)
				}
			})
		r.Func("bc_gpu_signals", "GPU health signals the daemons report now, by check.", TypeGauge, []string{"check"},
			func(emit Emit) {
				c.mu.Lock()
				defer c.mu.Unlock()
				for _, s := range c.signals {
					emit(float64(s.Signals), s.Check)
				}
			})
		r.Func("bc_leased_gpu_utilization_percent", "Leased GPUs' mean utilisation over the last five minutes the daemons reported, by model.", TypeGauge, []string{"model"},
			c.usageByModel(gpuUse.utilization))
		r.Func("bc_leased_gpu_active_ratio", "Share of leased GPUs' GPU-seconds that were active (at least 5% utilisation) over the last five minutes, by model.", TypeGauge, []string{"model"},
			c.usageByModel(gpuUse.activeRatio))
		if opts.ByTenant {
			byTenant := []string{"tenant_id", "pool_id", "model"}
			r.Func("bc_tenant_gpu_utilization_percent", "Leased GPUs' mean utilisation over the last five minutes the daemons reported, by tenant, pool and model.", TypeGauge, byTenant,
				c.usageByTenant(gpuUse.utilization))
			r.Func("bc_tenant_gpu_active_ratio", "Share of leased GPUs' GPU-seconds that were active over the last five minutes, by tenant, pool and model.", TypeGauge, byTenant,
				c.usageByTenant(gpuUse.activeRatio))
			r.Func("bc_tenant_idle_gpus", "Leased GPUs that were not active, on average over the last five minutes, by tenant, pool and model: avg_over_time over an hour is idle GPU-hours an hour.", TypeGauge, byTenant,
				c.usageByTenant(gpuUse.idleGPUs))
		}
		r.Func("bc_idle_leases", "Placed leases their pools' idle policies found idle.", TypeGauge, nil,
			func(emit Emit) {
				c.mu.Lock()
				defer c.mu.Unlock()
				if c.idleOK {
					emit(float64(c.idle))
				}
			})
		r.Func("bc_remediations", "Remediations waiting, running and ended in service (hardware not yet returned), by state and ladder.", TypeGauge, []string{"state", "ladder"},
			func(emit Emit) {
				c.mu.Lock()
				defer c.mu.Unlock()
				for _, m := range c.remediations {
					emit(float64(m.Remediations), m.State, m.Ladder)
				}
			})
		return c
	})
}

// dbCollector reads the database at most once per TTL and keeps the last reading.
type dbCollector struct {
	q      *db.Queries
	opts   DatabaseOptions
	errors *Counter

	mu      sync.Mutex
	at      time.Time // of the last attempt, successful or not
	read    bool      // whether any attempt was made
	ok      bool
	queue   []db.ReconcileQueueStatsRow
	queueOK bool
	kinds   map[string]bool // every kind seen, reported at 0 when its queue is empty
	locks   []db.LockHoldersRow
	outbox  []db.OutboxLagRow
	gpus    []db.GPUsByHealthRow
	signals []db.GPUSignalsByCheckRow
	// remediations are those in progress or in service, by state and ladder.
	remediations []db.RemediationsByStateRow
	// utilization is the leased GPUs' over the last minutes, by model; idle the idle leases.
	utilization []db.LeasedGPUUtilizationRow
	idle        int64
	idleOK      bool
}

// refresh reads the database unless the last attempt is younger than the TTL. Concurrent scrapes
// wait for one reading instead of each starting their own.
func (c *dbCollector) refresh(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Now()
	if c.read && now.Sub(c.at) < c.opts.TTL {
		return
	}
	c.at, c.read = now, true
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.Timeout)
	defer cancel()
	c.ok = true
	fail := func(what string, err error) {
		c.ok = false
		c.errors.Inc()
		c.opts.Logger.WarnContext(ctx, "read metrics from the database", "what", what, "err", err)
	}
	var err error
	if c.queue, err = c.q.ReconcileQueueStats(ctx); err != nil {
		fail("reconcile queues", err)
	}
	c.queueOK = err == nil
	for _, q := range c.queue {
		c.kinds[q.Kind] = true
	}
	if c.locks, err = c.q.LockHolders(ctx); err != nil {
		fail("locks", err)
	}
	if c.outbox, err = c.q.OutboxLag(ctx, c.opts.OutboxCap); err != nil {
		fail("outbox lag", err)
	}
	if c.gpus, err = c.q.GPUsByHealth(ctx); err != nil {
		fail("GPUs by health", err)
	}
	if c.signals, err = c.q.GPUSignalsByCheck(ctx); err != nil {
		fail("GPU signals by check", err)
	}
	if c.remediations, err = c.q.RemediationsByState(ctx); err != nil {
		fail("remediations by state", err)
	}
	if c.utilization, err = c.q.LeasedGPUUtilization(ctx); err != nil {
		fail("leased GPU utilisation", err)
	}
	c.idle, err = c.q.IdleLeaseCount(ctx)
	if c.idleOK = err == nil; err != nil {
		fail("idle leases", err)
	}
}

func (c *dbCollector) queues(value func(db.ReconcileQueueStatsRow) float64) func(Emit) {
	return func(emit Emit) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.queueOK {
			return
		}
		present := make(map[string]bool, len(c.queue))
		for _, q := range c.queue {
			present[q.Kind] = true
			emit(value(q), q.Kind)
		}
		for k := range c.kinds {
			if !present[k] {
				emit(0, k)
			}
		}
	}
}

// outboxLag emits a lag per kind of sink: a tenant's webhook sinks ("webhook:<id>") are summed
// into one "webhook" series (events added, the oldest age kept), so no label names a tenant's
// webhook and the series do not grow with the tenants.
func (c *dbCollector) outboxLag(value func(db.OutboxLagRow) float64, combine func(a, b float64) float64) func(Emit) {
	return func(emit Emit) {
		c.mu.Lock()
		defer c.mu.Unlock()
		var kinds []string
		byKind := map[string]float64{}
		for _, o := range c.outbox {
			kind, _, _ := strings.Cut(o.Sink, ":")
			v := value(o)
			if prev, ok := byKind[kind]; ok {
				v = combine(prev, v)
			} else {
				kinds = append(kinds, kind)
			}
			byKind[kind] = v
		}
		for _, k := range kinds {
			emit(byKind[k], k)
		}
	}
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
