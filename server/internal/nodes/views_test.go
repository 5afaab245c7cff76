package nodes_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/server/servertest"
)

// placeNodes moves nodes into a pool and names them prefix-0, prefix-1, ..., as joins with a
// pool's token and hosts of that name would.
func placeNodes(t testing.TB, pool *pgxpool.Pool, ids []uuid.UUID, poolName, prefix string) {
	t.Helper()
	if _, err := pool.Exec(ctx, `
		UPDATE nodes n SET pool = $2, hostname = $3 || (u.i - 1)::text
		FROM unnest($1::uuid[]) WITH ORDINALITY AS u (id, i) WHERE n.id = u.id`, ids, poolName, prefix+"-"); err != nil {
		t.Fatal(err)
	}
}

func TestListFiltersAndSummary(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	tenant := tenantOf(t, env, env.AdminKey)
	a100 := capacitytest.Nodes(t, env.Pool, tenant, 3, capacitytest.NodeSpec{GPUs: 4, Model: "A100", Labels: map[string]string{"zone": "eu"}})
	h100 := capacitytest.Nodes(t, env.Pool, tenant, 2, capacitytest.NodeSpec{GPUs: 8, Model: "H100", State: "cordoned", Offline: true, Labels: map[string]string{"zone": "us"}})
	bare := capacitytest.Nodes(t, env.Pool, tenant, 1, capacitytest.NodeSpec{State: "joining"})
	placeNodes(t, env.Pool, h100, "big", "gpu-h")
	other := capacitytest.Tenant(t, env.Pool, "other")
	capacitytest.Nodes(t, env.Pool, other, 2, capacitytest.NodeSpec{GPUs: 4, Model: "A100"})
	c := client(env, env.AdminKey)

	idsOf := func(req *nodesv1.ListRequest) []string {
		t.Helper()
		var out []string
		for {
			res, err := c.List(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range res.GetNodes() {
				out = append(out, n.GetId())
			}
			if req.PageToken = res.GetNextPageToken(); req.PageToken == "" {
				return out
			}
		}
	}
	want := func(ids ...[]uuid.UUID) []string {
		var out []string
		for _, group := range ids {
			for _, id := range group {
				out = append(out, id.String())
			}
		}
		slices.Sort(out)
		return out
	}
	yes, no := true, false
	for _, tc := range []struct {
		name string
		req  *nodesv1.ListRequest
		want []string
	}{
		{"none", &nodesv1.ListRequest{}, want(a100, h100, bare)},
		{"gpu model, paged", &nodesv1.ListRequest{GpuModel: "A100", PageSize: 2}, want(a100)},
		{"gpu model unknown", &nodesv1.ListRequest{GpuModel: "A10"}, nil},
		{"states", &nodesv1.ListRequest{States: []string{"cordoned", "joining"}}, want(h100, bare)},
		{"online", &nodesv1.ListRequest{Online: &yes}, want(a100, bare)},
		{"offline", &nodesv1.ListRequest{Online: &no}, want(h100)},
		{"pool", &nodesv1.ListRequest{Pool: "big"}, want(h100)},
		{"hostname prefix", &nodesv1.ListRequest{HostnamePrefix: "gpu-h-1"}, want(h100[1:])},
		{"labels and model", &nodesv1.ListRequest{LabelSelector: map[string]string{"zone": "us"}, GpuModel: "H100"}, want(h100)},
		{"all must match", &nodesv1.ListRequest{GpuModel: "H100", Online: &yes}, nil},
	} {
		if got := idsOf(tc.req); !slices.Equal(got, tc.want) {
			t.Errorf("%s: listed %v, want %v", tc.name, got, tc.want)
		}
	}

	sum, err := c.Summary(ctx, &nodesv1.SummaryRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if sum.GetTotal() != 6 || sum.GetOnline() != 4 || sum.GetOffline() != 2 || sum.GetGpus() != 28 {
		t.Errorf("summary total/online/offline/gpus = %d/%d/%d/%d, want 6/4/2/28", sum.GetTotal(), sum.GetOnline(), sum.GetOffline(), sum.GetGpus())
	}
	if s := sum.GetStates(); len(s) != 3 || s["ready"] != 3 || s["cordoned"] != 2 || s["joining"] != 1 {
		t.Errorf("summary states = %v", s)
	}
	models := sum.GetGpuModels()
	if len(models) != 2 || models[0].GetModel() != "A100" || models[0].GetGpus() != 12 || models[0].GetNodes() != 3 ||
		models[1].GetModel() != "H100" || models[1].GetGpus() != 16 || models[1].GetNodes() != 2 {
		t.Errorf("summary gpu models = %v", models)
	}
	sum, err = c.Summary(ctx, &nodesv1.SummaryRequest{GpuModel: "H100", Pool: "big", HostnamePrefix: "gpu-"})
	if err != nil {
		t.Fatal(err)
	}
	if sum.GetTotal() != 2 || sum.GetStates()["cordoned"] != 2 || sum.GetOffline() != 2 || sum.GetGpus() != 16 || len(sum.GetGpuModels()) != 1 {
		t.Errorf("filtered summary = %v", sum)
	}
	// A node with GPUs of two models and one without a model; inventories only when asked for.
	mixed := capacitytest.Nodes(t, env.Pool, tenant, 1, capacitytest.NodeSpec{})
	placeNodes(t, env.Pool, mixed, "", "mixed")
	if _, err := env.Pool.Exec(ctx, `UPDATE nodes SET inventory = '{"gpus": [{"model": "H100"}, {"index": 1}, {"index": 2, "model": "A100"}]}' WHERE id = $1`, mixed[0]); err != nil {
		t.Fatal(err)
	}
	sum, err = c.Summary(ctx, &nodesv1.SummaryRequest{HostnamePrefix: "mixed-"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range sum.GetGpuModels() {
		got = append(got, fmt.Sprintf("%s:%d/%d", m.GetModel(), m.GetGpus(), m.GetNodes()))
	}
	if sum.GetTotal() != 1 || sum.GetGpus() != 3 || !slices.Equal(got, []string{":1/1", "A100:1/1", "H100:1/1"}) {
		t.Errorf("summary of a mixed node: total %d, gpus %d, models %v", sum.GetTotal(), sum.GetGpus(), got)
	}
	for _, with := range []bool{false, true} {
		res, err := c.List(ctx, &nodesv1.ListRequest{HostnamePrefix: "mixed-", IncludeInventory: with})
		if err != nil {
			t.Fatal(err)
		}
		if n := len(res.GetNodes()[0].GetInventory().GetGpus()); (n == 3) != with {
			t.Errorf("include_inventory %v: %d GPUs listed", with, n)
		}
	}
}

func TestFilterValidation(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	long := strings.Repeat("x", 257)
	for field, req := range map[string]*nodesv1.ListRequest{
		"states":          {States: []string{"ready", "asleep"}},
		"gpu_model":       {GpuModel: long},
		"pool":            {Pool: "a\x00b"},
		"hostname_prefix": {HostnamePrefix: long},
		"label_selector":  {LabelSelector: map[string]string{"-bad": "x"}},
	} {
		_, err := c.List(ctx, req)
		wantField(t, err, field)
		_, err = c.Summary(ctx, &nodesv1.SummaryRequest{
			States: req.States, GpuModel: req.GpuModel, Pool: req.Pool, HostnamePrefix: req.HostnamePrefix, LabelSelector: req.LabelSelector,
		})
		wantField(t, err, field)
	}
}
