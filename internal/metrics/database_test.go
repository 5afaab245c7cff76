package metrics

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	dto "github.com/prometheus/client_model/go"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// series maps a family's first label value ("" without labels) to its value.
func series(fams map[string]*dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	f, ok := fams[name]
	if !ok {
		return nil
	}
	for _, m := range f.Metric {
		k := ""
		if len(m.Label) > 0 {
			k = m.Label[0].GetValue()
		}
		switch {
		case m.Gauge != nil:
			out[k] = m.GetGauge().GetValue()
		case m.Counter != nil:
			out[k] = m.GetCounter().GetValue()
		}
	}
	return out
}

func TestDatabaseMetrics(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	q := db.New(pool)

	// Reconcile queue: three keys of one kind, one of them pushed into the future.
	must(t, q.EnqueueReconcile(ctx, db.EnqueueReconcileParams{Kind: "test.kind", Keys: []string{"a", "b", "c"}}))
	must(t, q.RetryReconcile(ctx, db.RetryReconcileParams{Kind: "test.kind", Key: "c", DelayMs: 3_600_000}))
	// Locks: two live for h1, one for h2, one expired for h3.
	for holder, names := range map[string][]string{"h1": {"shard:x:1", "singleton:y"}, "h2": {"shard:x:2"}, "h3": {"singleton:z"}} {
		if _, err := q.AcquireLocks(ctx, db.AcquireLocksParams{Holder: holder, TtlMs: 60_000, Names: names}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := pool.Exec(ctx, "UPDATE locks SET expires_at = now() - interval '1 second' WHERE holder = 'h3'")
	must(t, err)
	// Outbox: a log sink (every event) and a webhook sink (its tenant's node.ready events).
	must(t, q.EnsureRootTenant(ctx, db.EnsureRootTenantParams{ID: uuid.New(), Name: "root", DisplayName: "Root"}))
	root, err := q.GetRootTenant(ctx)
	must(t, err)
	other, err := q.CreateTenant(ctx, db.CreateTenantParams{ID: uuid.New(), ParentID: &root.ID, Name: "other", DisplayName: "Other"})
	must(t, err)
	hook, err := q.CreateWebhook(ctx, db.CreateWebhookParams{ID: uuid.New(), TenantID: root.ID, Url: "https://example.com/hook",
		EventTypes: []string{"node.ready"}, SecretSealed: []byte("x")})
	must(t, err)
	otherHook, err := q.CreateWebhook(ctx, db.CreateWebhookParams{ID: uuid.New(), TenantID: other.ID, Url: "https://other.example.com/hook",
		EventTypes: []string{"node.ready"}, SecretSealed: []byte("x")})
	must(t, err)
	must(t, q.EnsureSinkCursor(ctx, db.EnsureSinkCursorParams{Sink: "log"}))
	must(t, q.EnsureSinkCursor(ctx, db.EnsureSinkCursorParams{Sink: "webhook:" + hook.ID.String(), WebhookID: &hook.ID}))
	must(t, q.EnsureSinkCursor(ctx, db.EnsureSinkCursorParams{Sink: "webhook:" + otherHook.ID.String(), WebhookID: &otherHook.ID}))
	for _, e := range []struct {
		tenant uuid.UUID
		typ    string
	}{{root.ID, "node.ready"}, {root.ID, "node.ready"}, {root.ID, "node.gone"}, {other.ID, "node.ready"}} {
		must(t, q.InsertOutboxEvent(ctx, db.InsertOutboxEventParams{TenantID: e.tenant, Type: e.typ, Subject: "s", Payload: []byte("{}")}))
	}

	// GPUs: a node of root with two H100s, one of them unhealthy.
	gpuNode := uuid.New()
	_, err = pool.Exec(ctx, `INSERT INTO nodes (id, tenant_id, hostname, inventory)
		VALUES ($1, $2, 'gpu-node', '{"gpus": [{"index": 0, "model": "H100", "uuid": "GPU-a"}, {"index": 1, "model": "H100", "uuid": "GPU-b"}]}')`,
		gpuNode, root.ID)
	must(t, err)
	// Its daemon reports two Xids and a double-bit ECC count.
	_, err = pool.Exec(ctx, `INSERT INTO node_gpu_health (node_id, report) VALUES ($1,
		'{"signals": [{"gpuUuid": "GPU-b", "check": "xid", "code": "79"}, {"gpuUuid": "GPU-b", "check": "xid", "code": "13"}, {"gpuUuid": "GPU-a", "check": "ecc_dbe", "count": "1"}]}')`,
		gpuNode)
	must(t, err)
	_, err = pool.Exec(ctx, `UPDATE devices SET health = 'unhealthy' WHERE uuid = 'GPU-b'`)
	must(t, err)
	// The node's devices enqueued the health reconciler; the queue checks below count test.kind only.
	_, err = pool.Exec(ctx, `DELETE FROM reconcile_queue WHERE kind = 'gpu.health'`)
	must(t, err)

	now := time.Now()
	var clock sync.Mutex
	r := NewRegistry()
	RegisterDatabase(r, pool, DatabaseOptions{TTL: time.Minute, Now: func() time.Time {
		clock.Lock()
		defer clock.Unlock()
		return now
	}})
	RegisterPool(r, pool)
	advance := func() {
		clock.Lock()
		defer clock.Unlock()
		now = now.Add(time.Minute)
	}

	exposed := text(t, r)
	// No label names a tenant or one of its webhooks: the webhook sinks are one series.
	for _, id := range []uuid.UUID{root.ID, other.ID, hook.ID, otherHook.ID} {
		if strings.Contains(exposed, id.String()) {
			t.Errorf("/metrics names %s:\n%s", id, exposed)
		}
	}
	fams := parse(t, exposed)
	check := func(name string, want map[string]float64) {
		t.Helper()
		got := series(fams, name)
		if len(got) != len(want) {
			t.Errorf("%s = %v, want %v", name, got, want)
			return
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s = %v, want %v", name, got, want)
				return
			}
		}
	}
	check("bc_metrics_database_up", map[string]float64{"": 1})
	check("bc_reconcile_queue_depth", map[string]float64{"test.kind": 3})
	check("bc_reconcile_queue_due", map[string]float64{"test.kind": 2})
	check("bc_leases_held", map[string]float64{"h1": 2, "h2": 1})
	check("bc_outbox_lag_events", map[string]float64{"log": 4, "webhook": 3}) // 2 for root's hook, 1 for other's
	gpus := map[string]float64{}
	for _, m := range fams["bc_gpus"].GetMetric() {
		gpus[m.GetLabel()[0].GetValue()+"/"+m.GetLabel()[1].GetValue()] = m.GetGauge().GetValue()
	}
	if len(gpus) != 2 || gpus["healthy/H100"]+gpus["H100/healthy"] != 1 || gpus["unhealthy/H100"]+gpus["H100/unhealthy"] != 1 {
		t.Errorf("bc_gpus = %v, want one healthy and one unhealthy H100", gpus)
	}
	check("bc_gpu_signals", map[string]float64{"xid": 2, "ecc_dbe": 1})
	check("bc_idle_leases", map[string]float64{"": 0})
	for sink, age := range series(fams, "bc_outbox_lag_seconds") {
		if age <= 0 || age > 60 {
			t.Errorf("outbox lag of %s is %vs", sink, age)
		}
	}
	if age := series(fams, "bc_reconcile_queue_oldest_due_age_seconds")["test.kind"]; age < 0 || age > 60 {
		t.Errorf("oldest due age %v", age)
	}
	if c := series(fams, "bc_db_pool_connections"); c["acquired"]+c["idle"] < 1 {
		t.Errorf("pool connections %v", c)
	}
	if n := series(fams, "bc_db_pool_acquires_total")[""]; n < 1 {
		t.Errorf("pool acquires %v", n)
	}

	// Within the TTL a scrape reads nothing: the drained queue still shows.
	rows, err := q.ClaimReconcile(ctx, db.ClaimReconcileParams{Kind: "test.kind", Shards: allShards(), Lim: 10, VisibilityMs: 1})
	must(t, err)
	var keys []string
	var gens []int64
	for _, row := range rows {
		keys, gens = append(keys, row.Key), append(gens, row.Generation)
	}
	must(t, q.CompleteReconcile(ctx, db.CompleteReconcileParams{Kind: "test.kind", Keys: keys, Generations: gens}))
	_, err = pool.Exec(ctx, "DELETE FROM reconcile_queue")
	must(t, err)
	fams = parse(t, text(t, r))
	check("bc_reconcile_queue_depth", map[string]float64{"test.kind": 3})

	// After the TTL it reads again; a kind seen before stays, at zero.
	advance()
	fams = parse(t, text(t, r))
	check("bc_reconcile_queue_depth", map[string]float64{"test.kind": 0})
	check("bc_reconcile_queue_oldest_due_age_seconds", map[string]float64{"test.kind": 0})

	// A failed reading drops the series and says so.
	pool.Close()
	advance()
	fams = parse(t, text(t, r))
	check("bc_metrics_database_up", map[string]float64{"": 0})
	check("bc_metrics_database_errors_total", map[string]float64{"": 8})
	check("bc_reconcile_queue_depth", map[string]float64{})
	check("bc_leases_held", map[string]float64{})
	check("bc_outbox_lag_events", map[string]float64{})
	check("bc_gpus", map[string]float64{})
	check("bc_gpu_signals", map[string]float64{})
	check("bc_remediations", map[string]float64{})
	check("bc_leased_gpu_utilization_percent", map[string]float64{})
	check("bc_idle_leases", map[string]float64{})
}

func allShards() []int32 {
	s := make([]int32, 256)
	for i := range s {
		s[i] = int32(i)
	}
	return s
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
