package metrics

import (
	"strings"
	"testing"

	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
)

// TestGPUUseMetrics: the leased GPUs' use over the last five minutes, exact against known
// minutes, by model (the fleet) and, for the operators' listener only, by tenant, pool and
// model; a minute older than the window counts nowhere.
func TestGPUUseMetrics(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	root := capacitytest.RootTenant(t, pool)
	other := capacitytest.Tenant(t, pool, "other")
	nodes := capacitytest.Nodes(t, pool, root, 1, capacitytest.NodeSpec{GPUs: 8, Model: "H100"})
	p := capacitytest.Pool(t, pool, root, "p", nil, nodes...)
	mine := capacitytest.Leases(t, pool, root, p, 1, capacitytest.LeaseSpec{GPUs: 4, Model: "H100"})[0]
	theirs := capacitytest.Leases(t, pool, other, p, 1, capacitytest.LeaseSpec{GPUs: 2, Model: "H100"})[0]
	// Four GPUs at 50%, half the time active; two at 90%, all the time; and an old minute.
	_, err := pool.Exec(t.Context(), `
		INSERT INTO lease_gpu_minutes (lease_id, node_id, minute, tenant_id, pool_id, gpus, gpu_seconds,
		                               active_gpu_seconds, util_sum, util_gpus, util_max, memory_peak_bytes, model)
		VALUES ($1, $3, date_trunc('minute', now()) - interval '1 minute', $4, $6, 4, 240, 120, 200, 4, 80, 0, 'H100'),
		       ($2, $3, date_trunc('minute', now()) - interval '2 minutes', $5, $6, 2, 120, 120, 180, 2, 95, 0, 'H100'),
		       ($1, $3, date_trunc('minute', now()) - interval '1 hour', $4, $6, 4, 240, 0, 0, 4, 0, 0, 'H100')`,
		mine, theirs, nodes[0], root, other, p)
	must(t, err)

	r := NewRegistry()
	RegisterDatabase(r, pool, DatabaseOptions{ByTenant: true})
	fams := parse(t, text(t, r))
	get := func(name string) map[string]float64 {
		out := map[string]float64{}
		for _, m := range fams[name].GetMetric() {
			var k []string
			for _, l := range m.GetLabel() {
				k = append(k, l.GetValue())
			}
			out[strings.Join(k, ",")] = m.GetGauge().GetValue()
		}
		return out
	}
	near := func(name string, want map[string]float64) {
		t.Helper()
		got := get(name)
		if len(got) != len(want) {
			t.Errorf("%s = %v, want %v", name, got, want)
			return
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g < v-1e-9 || g > v+1e-9 {
				t.Errorf("%s{%s} = %v, want %v", name, k, g, v)
			}
		}
	}
	me, them := root.String()+","+p.String()+",H100", other.String()+","+p.String()+",H100"
	near("bc_leased_gpu_utilization_percent", map[string]float64{"H100": 380.0 / 6})
	near("bc_leased_gpu_active_ratio", map[string]float64{"H100": 240.0 / 360})
	near("bc_tenant_gpu_utilization_percent", map[string]float64{me: 50, them: 90})
	near("bc_tenant_gpu_active_ratio", map[string]float64{me: 0.5, them: 1})
	near("bc_tenant_idle_gpus", map[string]float64{me: 120.0 / 300, them: 0})

	// Without ByTenant (the API port's /metrics) no series names a tenant.
	api := NewRegistry()
	RegisterDatabase(api, pool, DatabaseOptions{})
	exposed := text(t, api)
	for _, id := range []string{root.String(), other.String()} {
		if strings.Contains(exposed, id) {
			t.Errorf("the API port's /metrics names tenant %s", id)
		}
	}
	if !strings.Contains(exposed, "bc_leased_gpu_utilization_percent") {
		t.Error("the fleet's series are missing")
	}
}
