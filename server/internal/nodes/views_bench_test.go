package nodes_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/server/servertest"
)

// BenchmarkViews10k measures nodes/list and nodes/summary over HTTP at 10,000 nodes, one caller
// at a time, and reports each call's p50 and p99 (ns/op is the mean). The fleet interleaves
// A100, H100 and L4 nodes by id; its 100 B200 nodes come last, the worst case for a filtered
// page read in id order. Old and new are compared in one run: "old-statement" and
// "new-statement" run the statement List used before (ListNodes, labels only) and the one it
// uses now on the same label page; "count-by-paging-500" is what a true total took before
// Summary; "page-before" is what the dashboard's nodes page did (500 nodes, a Get each) and
// "page-after" what it does now.
//
//	go test -run '^$' -bench Views10k -benchtime 50x ./server/internal/nodes/
func BenchmarkViews10k(b *testing.B) {
	env := servertest.New(b)
	tenant := tenantOf(b, env, env.AdminKey)
	for round := range 10 {
		capacitytest.Nodes(b, env.Pool, tenant, 250, capacitytest.NodeSpec{GPUs: 8, Model: "A100", Labels: map[string]string{"zone": "eu"}})
		h := capacitytest.Nodes(b, env.Pool, tenant, 250, capacitytest.NodeSpec{GPUs: 8, Model: "H100", Labels: map[string]string{"zone": "us"}, Offline: round%2 == 1})
		placeNodes(b, env.Pool, h, "big", "h100-"+string(rune('a'+round)))
		capacitytest.Nodes(b, env.Pool, tenant, 490, capacitytest.NodeSpec{GPUs: 1, Model: "L4", State: []string{"ready", "cordoned"}[round%2]})
	}
	capacitytest.Nodes(b, env.Pool, tenant, 100, capacitytest.NodeSpec{GPUs: 8, Model: "B200"})
	if _, err := env.Pool.Exec(ctx, "ANALYZE nodes"); err != nil {
		b.Fatal(err)
	}
	c := client(env, env.AdminKey)
	yes := true
	label := map[string]string{"zone": "us"}
	list := func(req *nodesv1.ListRequest, want int) func(b *testing.B) {
		return func(b *testing.B) {
			b.Helper()
			res, err := c.List(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			if len(res.GetNodes()) != want {
				b.Fatalf("listed %d nodes, want %d", len(res.GetNodes()), want)
			}
		}
	}
	summary := func(req *nodesv1.SummaryRequest, total int64) func(b *testing.B) {
		return func(b *testing.B) {
			b.Helper()
			res, err := c.Summary(ctx, req)
			if err != nil {
				b.Fatal(err)
			}
			if res.GetTotal() != total {
				b.Fatalf("summary total %d, want %d", res.GetTotal(), total)
			}
		}
	}
	// What a true total took before Summary: paging through the whole fleet.
	countByPaging := func(b *testing.B) {
		b.Helper()
		n, tok := 0, ""
		for {
			res, err := c.List(ctx, &nodesv1.ListRequest{PageSize: 500, PageToken: tok})
			if err != nil {
				b.Fatal(err)
			}
			n += len(res.GetNodes())
			if tok = res.GetNextPageToken(); tok == "" {
				break
			}
		}
		if n != 10_000 {
			b.Fatalf("counted %d nodes", n)
		}
	}
	// The nodes page before: the first 500 nodes (pages of 100), then a Get for each, 6 at a time.
	oldPage := func(b *testing.B) {
		b.Helper()
		var ids []string
		for tok := ""; len(ids) < 500; {
			res, err := c.List(ctx, &nodesv1.ListRequest{PageSize: 100, PageToken: tok})
			if err != nil {
				b.Fatal(err)
			}
			for _, n := range res.GetNodes() {
				ids = append(ids, n.GetId())
			}
			tok = res.GetNextPageToken()
		}
		work := make(chan string)
		fns := make([]func() error, 6)
		for i := range fns {
			fns[i] = func() error {
				var errs error
				for id := range work {
					_, err := c.Get(ctx, &nodesv1.GetRequest{Id: id})
					errs = errors.Join(errs, err)
				}
				return errs
			}
		}
		go func() {
			defer close(work)
			for _, id := range ids {
				work <- id
			}
		}()
		if err := together(fns...); err != nil {
			b.Fatal(err)
		}
	}
	// The nodes page now, filtered by GPU model: the fleet's summary, the filter's summary and one
	// page of 100 with inventories, at once.
	newPage := func(b *testing.B) {
		b.Helper()
		err := together(
			func() error { _, err := c.Summary(ctx, &nodesv1.SummaryRequest{}); return err },
			func() error { _, err := c.Summary(ctx, &nodesv1.SummaryRequest{GpuModel: "H100"}); return err },
			func() error {
				_, err := c.List(ctx, &nodesv1.ListRequest{PageSize: 100, GpuModel: "H100", IncludeInventory: true})
				return err
			},
		)
		if err != nil {
			b.Fatal(err)
		}
	}
	q := db.New(env.Pool)
	statement := func(old bool) func(b *testing.B) {
		return func(b *testing.B) {
			b.Helper()
			var n int
			var err error
			if old {
				var rows []db.ListNodesRow
				rows, err = q.ListNodes(ctx, db.ListNodesParams{TenantID: tenant, After: uuid.Nil, Selector: fleet.EncodeLabels(label), Lim: 101})
				n = len(rows)
			} else {
				var rows []db.ListNodesFilteredRow
				rows, err = q.ListNodesFiltered(ctx, db.ListNodesFilteredParams{
					TenantID: tenant, After: uuid.Nil, Selector: fleet.EncodeLabels(label), States: []string{}, Lim: 101,
				})
				n = len(rows)
			}
			if err != nil || n != 101 {
				b.Fatalf("%d rows, %v", n, err)
			}
		}
	}
	for _, bc := range []struct {
		name string
		call func(b *testing.B)
	}{
		{"page-before/500-nodes-and-500-gets", oldPage},
		{"page-after/gpu-model-100-and-summaries", newPage},
		{"old-statement/labels-100", statement(true)},
		{"new-statement/labels-100", statement(false)},
		{"list/unfiltered-500", list(&nodesv1.ListRequest{PageSize: 500}, 500)},
		{"list/labels-100", list(&nodesv1.ListRequest{PageSize: 100, LabelSelector: label}, 100)},
		{"list/gpu-model-100", list(&nodesv1.ListRequest{PageSize: 100, GpuModel: "H100"}, 100)},
		{"list/gpu-model-rare-last-100", list(&nodesv1.ListRequest{PageSize: 100, GpuModel: "B200"}, 100)},
		{"list/state-online-pool-prefix-100", list(&nodesv1.ListRequest{
			PageSize: 100, States: []string{"ready"}, Online: &yes, Pool: "big", HostnamePrefix: "h100-c",
		}, 100)},
		{"count-by-paging-500/all", countByPaging},
		{"summary/all", summary(&nodesv1.SummaryRequest{}, 10_000)},
		{"summary/gpu-model", summary(&nodesv1.SummaryRequest{GpuModel: "B200"}, 100)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				bc.call(b)
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms")
		})
	}
}

// together runs fns concurrently and returns their errors joined.
func together(fns ...func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, f := range fns {
		wg.Go(func() { errs[i] = f() })
	}
	wg.Wait()
	return errors.Join(errs...)
}
