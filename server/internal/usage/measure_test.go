package usage_test

import (
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	usagev1 "github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/server/internal/usage"
	"github.com/better-compute/better-compute/server/servertest"
)

// TestMeasureExport100k measures an export of 100,000 rows through the handler, page by page
// (page_size 10,000): the time, and the peak heap above the start, sampled every millisecond,
// for docs/benchmarks.md. It runs only with BC_MEASURE_EXPORT=1:
//
//	BC_MEASURE_EXPORT=1 go test -count=1 -run TestMeasureExport100k -v ./server/internal/usage/
func TestMeasureExport100k(t *testing.T) {
	t.Parallel()
	if os.Getenv("BC_MEASURE_EXPORT") != "1" {
		t.Skip("set BC_MEASURE_EXPORT=1 to measure")
	}
	env := servertest.New(t)
	tenant := capacitytest.RootTenant(t, env.Pool)
	pool := manyRows(t, env.Pool, tenant, usage.MaxExportRows)
	svc := usage.New(env.Pool)
	cctx := auth.WithPrincipal(ctx, principalOf(tenant))

	runtime.GC()
	var base, peak atomic.Uint64
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base.Store(ms.HeapAlloc)
	allocated := ms.TotalAlloc
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				if m.HeapAlloc > peak.Load() {
					peak.Store(m.HeapAlloc)
				}
			}
		}
	}()
	began := time.Now()
	var rows, bytes int64
	pages := 0
	token := ""
	for {
		res, err := svc.Export(cctx, &usagev1.ExportRequest{StartTime: start, EndTime: end, PageSize: usage.MaxExportPageRows, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		rows += res.GetRows()
		bytes += int64(len(res.GetData()))
		if token = res.GetNextPageToken(); token == "" {
			break
		}
	}
	took := time.Since(began)
	close(stop)
	<-sampled
	runtime.ReadMemStats(&ms)
	t.Logf("%d rows, %d bytes in %d calls: %v, peak heap %.1f MiB above the start (%.1f MiB allocated in all)",
		rows, bytes, pages, took.Round(time.Millisecond), float64(peak.Load()-min(peak.Load(), base.Load()))/(1<<20), float64(ms.TotalAlloc-allocated)/(1<<20))

	// One row more: the export is refused, and how long that takes.
	if _, err := env.Pool.Exec(ctx, `
		INSERT INTO usage_hourly (tenant_id, hour, pool_id, resource, model, amount, records)
		VALUES ($1, $2, $3, 'gpu', 'one more', 3600, 1)`, tenant, h0, pool); err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	_, err := svc.Export(cctx, &usagev1.ExportRequest{StartTime: start, EndTime: end, PageSize: usage.MaxExportPageRows})
	t.Logf("over the cap: refused in %v (%v)", time.Since(began).Round(time.Millisecond), err)
}
