package usage_test

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	usagev1 "github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1/usagev1connect"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/server/internal/usage"
)

// busy is the sharing fixture with leases and the per-minute utilisation their GPUs reported
// (lease_gpu_minutes, as the gateway stores it):
//
//	lease  tenant pool   model minute     gpus active util_sum/util_gpus memory
//	la     a      shared H100  h0+0m      2    90     100/2              10 GiB
//	la     a      shared H100  h0+1m      2    30     40/2               20 GiB
//	la     a      shared H100  day+30h    2    120    200/2 (after the period)
//	lo     owner  shared H100  h0+2m      1    0      0/0 (no utilisation reported)
//	lb     b      shared H100  h1+5m      1    60     80/1               5 GiB
//	laOwn  a      a-own  A100  h0+3m      1    45     12.5/1             1 GiB
type busy struct {
	*sharing
	la, lo, lb, laOwn uuid.UUID
}

func newBusy(t *testing.T) *busy {
	t.Helper()
	b := &busy{sharing: newSharing(t)}
	pool := b.env.Pool
	node := capacitytest.Nodes(t, pool, b.owner, 1, capacitytest.NodeSpec{GPUs: 8, Model: "H100"})[0]
	lease := func(tenant, in uuid.UUID, model string) uuid.UUID {
		return capacitytest.Leases(t, pool, tenant, in, 1, capacitytest.LeaseSpec{GPUs: 1, Model: model})[0]
	}
	b.la, b.lo, b.lb = lease(b.a, b.shared, "H100"), lease(b.owner, b.shared, "H100"), lease(b.b, b.shared, "H100")
	b.laOwn = lease(b.a, b.aOwn, "A100")
	for _, m := range []struct {
		lease, tenant, pool uuid.UUID
		model               string
		at                  time.Time
		gpus, active        int64
		utilSum             float64
		utilGPUs            int
		memory              int64
	}{
		{b.la, b.a, b.shared, "H100", h0, 2, 90, 100, 2, 10 << 30},
		{b.la, b.a, b.shared, "H100", h0.Add(time.Minute), 2, 30, 40, 2, 20 << 30},
		{b.la, b.a, b.shared, "H100", day.Add(30 * time.Hour), 2, 120, 200, 2, 30 << 30},
		{b.lo, b.owner, b.shared, "H100", h0.Add(2 * time.Minute), 1, 0, 0, 0, 0},
		{b.lb, b.b, b.shared, "H100", h1.Add(5 * time.Minute), 1, 60, 80, 1, 5 << 30},
		{b.laOwn, b.a, b.aOwn, "A100", h0.Add(3 * time.Minute), 1, 45, 12.5, 1, 1 << 30},
	} {
		if _, err := pool.Exec(ctx, `
			INSERT INTO lease_gpu_minutes (lease_id, node_id, minute, tenant_id, pool_id, model, gpus, gpu_seconds,
			                               active_gpu_seconds, util_sum, util_gpus, memory_peak_bytes)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $7 * 60, $8, $9, $10, $11)`,
			m.lease, node, m.at, m.tenant, m.pool, m.model, m.gpus, m.active, m.utilSum, m.utilGPUs, m.memory); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// efficiency is a GPU Usage row as "tenant pool model active mean", with the hour first for
// hourly rows and "-" for a mean without samples; cpu and memory rows as "tenant pool resource
// active mean".
func efficiency(us []*usagev1.Usage) []string {
	out := []string{}
	for _, u := range us {
		mean := "-"
		if u.MeanUtilization != nil {
			mean = fmt.Sprint(u.GetMeanUtilization())
		}
		what := u.GetModel()
		if u.GetResource() != "gpu" {
			what = u.GetResource()
		}
		r := fmt.Sprintf("%s %s %s %v %s", u.GetTenantId(), u.GetPoolId(), what, u.GetActiveAmount(), mean)
		if u.GetHour() != nil {
			r = u.GetHour().AsTime().UTC().Format(time.RFC3339) + " " + r
		}
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

func eff(tenant, pool uuid.UUID, what string, active float64, mean string, hour ...time.Time) string {
	r := fmt.Sprintf("%s %s %s %v %s", tenant, pool, what, active, mean)
	if len(hour) > 0 {
		r = hour[0].UTC().Format(time.RFC3339) + " " + r
	}
	return r
}

func wantEfficiency(t *testing.T, what string, got []*usagev1.Usage, want ...string) {
	t.Helper()
	if g := efficiency(got); !slices.Equal(g, slices.Sorted(slices.Values(want))) {
		t.Errorf("%s:\n got %q\nwant %q", what, g, slices.Sorted(slices.Values(want)))
	}
}

// TestQueryPutsActiveBesideHeld: usage/query's GPU rows carry the active GPU-seconds and the
// mean utilisation of the minutes of the same tenant, pool, model and hours (hand-computed from
// the busy fixture: a's H100 minutes in the period are active 90+30 = 120 GPU-seconds, mean
// (100+40)/(2+2) = 35%); cpu and memory rows 0 and unset, as a GPU row without samples or
// whose minutes reported no utilisation; a minute after the period is not counted; and each
// scope reads only the utilisation of the usage it reads.
func TestQueryPutsActiveBesideHeld(t *testing.T) {
	t.Parallel()
	s := newBusy(t)
	owner, a, b := s.client(s.env.AdminKey), s.client(s.aKey), s.client(s.bKey)
	query := func(c usagev1connect.UsageServiceClient, scope usagev1.Scope) *usagev1.QueryResponse {
		t.Helper()
		res, err := c.Query(ctx, &usagev1.QueryRequest{StartTime: start, EndTime: end, Scope: scope, Hourly: true})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := query(owner, usagev1.Scope_SCOPE_OWNED_POOLS)
	wantEfficiency(t, "owner, owned pools", res.GetTotals(),
		eff(s.owner, s.shared, "H100", 0, "-"),
		eff(s.a, s.shared, "H100", 120, "35"),
		eff(s.a, s.shared, "cpu", 0, "-"),
		eff(s.a, s.shared, "memory", 0, "-"),
		eff(s.b, s.shared, "H100", 60, "80"),
	)
	wantEfficiency(t, "owner, owned pools, hourly", res.GetHours(),
		eff(s.owner, s.shared, "H100", 0, "-", h0),
		eff(s.a, s.shared, "H100", 120, "35", h0),
		eff(s.a, s.shared, "cpu", 0, "-", h0),
		eff(s.a, s.shared, "memory", 0, "-", h1),
		eff(s.b, s.shared, "H100", 60, "80", h1),
	)
	res = query(a, usagev1.Scope_SCOPE_UNSPECIFIED)
	wantEfficiency(t, "a, own", res.GetTotals(),
		eff(s.a, s.shared, "H100", 120, "35"),
		eff(s.a, s.shared, "cpu", 0, "-"),
		eff(s.a, s.shared, "memory", 0, "-"),
		eff(s.a, s.aOwn, "A100", 45, "12.5"),
		eff(s.a, s.gone, "H100", 0, "-"),
	)
	wantEfficiency(t, "a, own, hourly", res.GetHours(),
		eff(s.a, s.shared, "H100", 120, "35", h0),
		eff(s.a, s.shared, "cpu", 0, "-", h0),
		eff(s.a, s.shared, "memory", 0, "-", h1),
		eff(s.a, s.aOwn, "A100", 45, "12.5", h0),
		eff(s.a, s.gone, "H100", 0, "-", h0),
	)
	// A tenant never reads another's utilisation: b's rows are b's own, in either scope.
	wantEfficiency(t, "b, own", query(b, usagev1.Scope_SCOPE_UNSPECIFIED).GetTotals(), eff(s.b, s.shared, "H100", 60, "80"))
	wantEfficiency(t, "b, owned pools", query(b, usagev1.Scope_SCOPE_OWNED_POOLS).GetTotals())
	wantEfficiency(t, "a, owned pools", query(a, usagev1.Scope_SCOPE_OWNED_POOLS).GetTotals(), eff(s.a, s.aOwn, "A100", 45, "12.5"))
}

// TestExportCarriesActiveQuantity: the CSV and JSONL exports end with active_quantity (GPU-hours,
// 6 decimals: 120 GPU-seconds are 0.033333) and mean_utilization (2 decimals, empty or null
// without samples and for cpu and memory).
func TestExportCarriesActiveQuantity(t *testing.T) {
	t.Parallel()
	s := newBusy(t)
	owner, a := s.client(s.env.AdminKey), s.client(s.aKey)
	res, err := owner.Export(ctx, &usagev1.ExportRequest{StartTime: start, EndTime: end, Scope: usagev1.Scope_SCOPE_OWNED_POOLS})
	if err != nil {
		t.Fatal(err)
	}
	records := csvRecords(t, res.GetData())
	wantExport(t, "owner, owned pools, csv", records[1:],
		csvRecord(s.owner, s.shared, "shared", "gpu", "H100", "1.000000", "gpu-hours"),
		active(csvRecord(s.a, s.shared, "shared", "gpu", "H100", "2.000000", "gpu-hours", "0.500000"), "0.033333", "35.00"),
		csvRecord(s.a, s.shared, "shared", "cpu", "", "10.000000", "cpu-hours"),
		csvRecord(s.a, s.shared, "shared", "memory", "", "1.000000", "gib-hours"),
		active(csvRecord(s.b, s.shared, "shared", "gpu", "H100", "0.000001", "gpu-hours"), "0.016667", "80.00"),
	)
	res, err = a.Export(ctx, &usagev1.ExportRequest{StartTime: start, EndTime: end, Format: usagev1.ExportFormat_EXPORT_FORMAT_JSONL})
	if err != nil {
		t.Fatal(err)
	}
	wantExport(t, "a, own, jsonl", jsonlRecords(t, res.GetData()),
		active(csvRecord(s.a, s.shared, "shared", "gpu", "H100", "2.000000", "gpu-hours", "0.500000"), "0.033333", "35.00"),
		csvRecord(s.a, s.shared, "shared", "cpu", "", "10.000000", "cpu-hours"),
		csvRecord(s.a, s.shared, "shared", "memory", "", "1.000000", "gib-hours"),
		active(csvRecord(s.a, s.aOwn, "a-own", "gpu", "A100", "0.027778", "gpu-hours"), "0.012500", "12.50"),
		csvRecord(s.a, s.gone, "", "gpu", "H100", "0.100000", "gpu-hours"),
	)
}

// pt is a point as "time held share mean peak".
func pt(at time.Time, held, share, mean float64, peak int64) string {
	return fmt.Sprintf("%s %.6f %.4f %.2f %d", at.UTC().Format(time.RFC3339), held, share, mean, peak)
}

func points(ps []*usagev1.UtilizationPoint) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, pt(p.GetTime().AsTime(), p.GetHeldGpus(), p.GetActiveShare(), p.GetMeanUtilization(), p.GetPeakMemoryBytes()))
	}
	return out
}

// TestUtilizationSeries reads the busy fixture's minutes over time (hand-computed: a's hour h0
// holds 120+120+60 = 300 GPU-seconds, 300/3600 GPUs, active 165/300, mean (100+40+12.5)/5 =
// 30.5%), per lease, pool and tenant, a last step cut at the end averaged over its own length,
// and the scopes: a tenant never sees another tenant's utilisation, by naming its lease or pool
// or otherwise; a pool's owner sees every tenant's in its pools.
func TestUtilizationSeries(t *testing.T) {
	t.Parallel()
	s := newBusy(t)
	owner, a, b := s.client(s.env.AdminKey), s.client(s.aKey), s.client(s.bKey)
	series := func(c usagev1connect.UsageServiceClient, from, to time.Time, step time.Duration, lease, pool uuid.UUID, scope usagev1.Scope) []string {
		t.Helper()
		req := &usagev1.UtilizationRequest{StartTime: timestamppb.New(from), EndTime: timestamppb.New(to), Step: durationpb.New(step), Scope: scope}
		if lease != uuid.Nil {
			req.LeaseId = lease.String()
		}
		if pool != uuid.Nil {
			req.PoolId = pool.String()
		}
		res, err := c.Utilization(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return points(res.GetPoints())
	}
	want := func(what string, got []string, want ...string) {
		t.Helper()
		if !slices.Equal(got, want) {
			t.Errorf("%s:\n got %q\nwant %q", what, got, want)
		}
	}
	own, owned, none := usagev1.Scope_SCOPE_UNSPECIFIED, usagev1.Scope_SCOPE_OWNED_POOLS, uuid.Nil
	dayEnd := day.Add(24 * time.Hour)

	want("a, lease la, by minute", series(a, h0, h0.Add(10*time.Minute), time.Minute, s.la, none, own),
		pt(h0, 2, 0.75, 50, 10<<30), pt(h0.Add(time.Minute), 2, 0.25, 20, 20<<30))
	want("a, lease la, a step cut at the end", series(a, h0, h0.Add(30*time.Minute), time.Hour, s.la, none, own),
		pt(h0, 240.0/1800, 0.5, 35, 20<<30))
	want("a, whole tenant, by hour", series(a, day, dayEnd, time.Hour, none, none, own),
		pt(h0, 300.0/3600, 0.55, 30.5, 20<<30))
	want("a, its pool", series(a, day, dayEnd, time.Hour, none, s.aOwn, own), pt(h0, 60.0/3600, 0.75, 12.5, 1<<30))
	want("owner, owned pools, shared, by day", series(owner, day, dayEnd, 24*time.Hour, none, s.shared, owned),
		pt(day, 360.0/86400, 0.5, 44, 20<<30))
	want("owner, own leases", series(owner, day, dayEnd, time.Hour, none, none, own), pt(h0, 60.0/3600, 0, 0, 0))

	// Isolation.
	want("b, a's lease", series(b, day, dayEnd, time.Hour, s.la, none, own))
	want("b, a's lease, owned pools", series(b, day, dayEnd, time.Hour, s.la, none, owned))
	want("b, the shared pool", series(b, day, dayEnd, time.Hour, none, s.shared, own), pt(h1, 60.0/3600, 1, 80, 5<<30))
	want("b, owned pools", series(b, day, dayEnd, time.Hour, none, none, owned))
	want("a, owned pools, the owner's pool", series(a, day, dayEnd, time.Hour, none, s.shared, owned))
	want("a, owned pools", series(a, day, dayEnd, time.Hour, none, none, owned), pt(h0, 60.0/3600, 0.75, 12.5, 1<<30))
	want("owner, a's own pool", series(owner, day, dayEnd, time.Hour, none, s.aOwn, owned))

	for _, tc := range []struct {
		req   *usagev1.UtilizationRequest
		field string
	}{
		{&usagev1.UtilizationRequest{StartTime: start, EndTime: end}, "step"},
		{&usagev1.UtilizationRequest{StartTime: start, EndTime: end, Step: durationpb.New(30 * time.Second)}, "step"},
		{&usagev1.UtilizationRequest{StartTime: start, EndTime: end, Step: durationpb.New(90 * time.Second)}, "step"},
		{&usagev1.UtilizationRequest{StartTime: start, EndTime: end, Step: durationpb.New(25 * time.Hour)}, "step"},
		{&usagev1.UtilizationRequest{StartTime: start, EndTime: timestamppb.New(day.Add(usage.MaxPoints*time.Minute + time.Minute)), Step: durationpb.New(time.Minute)}, "step"},
		{&usagev1.UtilizationRequest{StartTime: start, EndTime: end, Step: durationpb.New(time.Hour), LeaseId: "x"}, "lease_id"},
		{&usagev1.UtilizationRequest{StartTime: start, EndTime: end, Step: durationpb.New(time.Hour), PoolId: "x"}, "pool_id"},
		{&usagev1.UtilizationRequest{StartTime: start, EndTime: end, Step: durationpb.New(time.Hour), Scope: 9}, "scope"},
		{&usagev1.UtilizationRequest{EndTime: end, Step: durationpb.New(time.Hour)}, "start_time"},
	} {
		_, err := a.Utilization(ctx, tc.req)
		wantField(t, err, connect.CodeInvalidArgument, tc.field)
	}
	// Exactly MaxPoints steps is allowed.
	if _, err := a.Utilization(ctx, &usagev1.UtilizationRequest{StartTime: start, EndTime: timestamppb.New(day.Add(usage.MaxPoints * time.Minute)), Step: durationpb.New(time.Minute)}); err != nil {
		t.Error(err)
	}
}

// csvRecords parses a CSV export, checking its header.
func csvRecords(t *testing.T, data []byte) [][]string {
	t.Helper()
	records, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(records) == 0 || strings.Join(records[0], ",") != "period_start,period_end,tenant_id,pool_id,pool_name,resource,model,quantity,unit,unhealthy_quantity,active_quantity,mean_utilization" {
		t.Fatalf("header of %q", records)
	}
	return records
}
