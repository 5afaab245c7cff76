package usage_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/timestamppb"

	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	usagev1 "github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1/usagev1connect"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/server/internal/usage"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// The period the fixtures' usage is read over, and two hours in it.
var (
	day   = time.Date(2031, 3, 1, 0, 0, 0, 0, time.UTC)
	h0    = day.Add(10 * time.Hour)
	h1    = day.Add(11 * time.Hour)
	start = timestamppb.New(day)
	end   = timestamppb.New(day.Add(24 * time.Hour))
)

// sharing is a root tenant ("owner") that grants its pool "shared" to tenants a and b, a's own
// pool, and usage (inserted as the usage job would have added it up) by all three:
//
//	owner  shared  gpu H100  3600 (h0)      owner  gone  cpu  3600 (h0)
//	a      shared  gpu H100  7200 (h0)      a      gone  gpu H100  360 (h0)
//	       (1800 of it on an unhealthy GPU)
//	a      shared  cpu       36000 (h0)     a      a-own gpu A100  100 (h0)
//	a      shared  memory    3686400 (h1)   b      shared gpu H100 0.0018 (h1), 99999 (after the period)
//
// "gone" was the owner's pool, granted to a, and is deleted.
type sharing struct {
	env                *servertest.Env
	owner, a, b        uuid.UUID
	aKey, bKey         string
	shared, aOwn, gone uuid.UUID
}

func newSharing(t *testing.T) *sharing {
	t.Helper()
	env := servertest.New(t)
	s := &sharing{env: env, owner: capacitytest.RootTenant(t, env.Pool)}
	for _, name := range []string{"a", "b"} {
		res, err := env.IAM(env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		id := uuid.MustParse(res.GetTenant().GetId())
		if name == "a" {
			s.a, s.aKey = id, res.GetOwnerApiKey()
		} else {
			s.b, s.bKey = id, res.GetOwnerApiKey()
		}
	}
	s.shared = capacitytest.Pool(t, env.Pool, s.owner, "shared", nil)
	s.gone = capacitytest.Pool(t, env.Pool, s.owner, "gone", nil)
	s.aOwn = capacitytest.Pool(t, env.Pool, s.a, "a-own", nil)
	s.grant(t, s.shared, s.a)
	s.grant(t, s.shared, s.b)
	s.grant(t, s.gone, s.a)

	s.use(t, s.owner, s.shared, h0, "gpu", "H100", "3600")
	s.use(t, s.a, s.shared, h0, "gpu", "H100", "7200", "1800")
	s.use(t, s.a, s.shared, h0, "cpu", "", "36000")
	s.use(t, s.a, s.shared, h1, "memory", "", "3686400")
	s.use(t, s.b, s.shared, h1, "gpu", "H100", "0.0018")
	s.use(t, s.b, s.shared, day.Add(30*time.Hour), "gpu", "H100", "99999")
	s.use(t, s.a, s.aOwn, h0, "gpu", "A100", "100")
	s.use(t, s.a, s.gone, h0, "gpu", "H100", "360")
	s.use(t, s.owner, s.gone, h0, "cpu", "", "3600")
	if _, err := env.Pool.Exec(ctx, `DELETE FROM pools WHERE id = $1`, s.gone); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *sharing) grant(t *testing.T, pool, grantee uuid.UUID) {
	t.Helper()
	if _, err := s.env.Pool.Exec(ctx, `
		INSERT INTO pool_grants (id, pool_id, owner_tenant_id, tenant_id, nominal)
		VALUES ($1, $2, $3, $4, '{"gpus": {"H100": 1}}')`, uuid.Must(uuid.NewV7()), pool, s.owner, grantee); err != nil {
		t.Fatal(err)
	}
}

// use inserts an hour's usage; unhealthy, when given, is the part of it held on an unhealthy GPU.
func (s *sharing) use(t *testing.T, tenant, pool uuid.UUID, hour time.Time, resource, model, amount string, unhealthy ...string) {
	t.Helper()
	sick := "0"
	if len(unhealthy) > 0 {
		sick = unhealthy[0]
	}
	if _, err := s.env.Pool.Exec(ctx, `
		INSERT INTO usage_hourly (tenant_id, hour, pool_id, resource, model, amount, unhealthy_amount, records)
		VALUES ($1, $2, $3, $4, $5, $6::numeric, $7::numeric, 1)`, tenant, hour, pool, resource, model, amount, sick); err != nil {
		t.Fatal(err)
	}
}

func (s *sharing) client(key string) usagev1connect.UsageServiceClient {
	return usagev1connect.NewUsageServiceClient(s.env.HTTPClient(key), s.env.URL)
}

// row is a Usage as "tenant pool resource model amount", with the hour first for hourly rows.
func row(tenant, pool uuid.UUID, resource, model string, amount float64, hour ...time.Time) string {
	r := fmt.Sprintf("%s %s %s %q %v", tenant, pool, resource, model, amount)
	if len(hour) > 0 {
		r = hour[0].UTC().Format(time.RFC3339) + " " + r
	}
	return r
}

// sick is row r with an unhealthy amount.
func sick(r string, unhealthy float64) string { return fmt.Sprintf("%s unhealthy %v", r, unhealthy) }

func rows(us []*usagev1.Usage) []string {
	out := []string{}
	for _, u := range us {
		r := fmt.Sprintf("%s %s %s %q %v", u.GetTenantId(), u.GetPoolId(), u.GetResource(), u.GetModel(), u.GetAmount())
		if u.GetUnhealthyAmount() != 0 {
			r = sick(r, u.GetUnhealthyAmount())
		}
		if u.GetHour() != nil {
			r = u.GetHour().AsTime().UTC().Format(time.RFC3339) + " " + r
		}
		out = append(out, r)
	}
	return out
}

// wantRows compares rows as sets, and checks that they come in the API's order: hourly rows by
// hour first, then every row by tenant, pool, resource and model.
func wantRows(t *testing.T, what string, got []*usagev1.Usage, want ...string) {
	t.Helper()
	if g, w := slices.Sorted(slices.Values(rows(got))), slices.Sorted(slices.Values(want)); !slices.Equal(g, w) {
		t.Errorf("%s:\n got %q\nwant %q", what, g, w)
	}
	ordered := slices.IsSortedFunc(got, func(a, b *usagev1.Usage) int {
		return cmp.Or(a.GetHour().AsTime().Compare(b.GetHour().AsTime()), strings.Compare(a.GetTenantId(), b.GetTenantId()),
			strings.Compare(a.GetPoolId(), b.GetPoolId()), strings.Compare(a.GetResource(), b.GetResource()), strings.Compare(a.GetModel(), b.GetModel()))
	})
	if !ordered {
		t.Errorf("%s: out of order: %q", what, rows(got))
	}
}

func wantField(t *testing.T, err error, code connect.Code, field string) {
	t.Helper()
	var cerr *connect.Error
	if connect.CodeOf(err) != code || !errors.As(err, &cerr) || !strings.HasPrefix(cerr.Message(), field+": ") {
		t.Errorf("error = %v, want %v naming %s", err, code, field)
	}
}

// TestOwnerSeesGranteesUsageByTenant: with the owned-pools scope the owner reads every tenant's
// usage of its pools, by tenant, and not its grantees' usage elsewhere nor a deleted pool's; by
// default each tenant reads only its own, also when it filters by a pool someone else owns.
func TestOwnerSeesGranteesUsageByTenant(t *testing.T) {
	t.Parallel()
	s := newSharing(t)
	owner, a, b := s.client(s.env.AdminKey), s.client(s.aKey), s.client(s.bKey)
	query := func(c usagev1connect.UsageServiceClient, scope usagev1.Scope, pool uuid.UUID) *usagev1.QueryResponse {
		t.Helper()
		req := &usagev1.QueryRequest{StartTime: start, EndTime: end, Scope: scope, Hourly: true}
		if pool != uuid.Nil {
			req.PoolId = pool.String()
		}
		res, err := c.Query(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	owned := usagev1.Scope_SCOPE_OWNED_POOLS
	own := usagev1.Scope_SCOPE_UNSPECIFIED

	res := query(owner, owned, uuid.Nil)
	ownerShared := []string{
		row(s.owner, s.shared, "gpu", "H100", 3600),
		sick(row(s.a, s.shared, "gpu", "H100", 7200), 1800),
		row(s.a, s.shared, "cpu", "", 36000),
		row(s.a, s.shared, "memory", "", 3686400),
		row(s.b, s.shared, "gpu", "H100", 0.0018),
	}
	wantRows(t, "owner, owned pools", res.GetTotals(), ownerShared...)
	wantRows(t, "owner, owned pools, hourly", res.GetHours(),
		row(s.owner, s.shared, "gpu", "H100", 3600, h0),
		sick(row(s.a, s.shared, "gpu", "H100", 7200, h0), 1800),
		row(s.a, s.shared, "cpu", "", 36000, h0),
		row(s.a, s.shared, "memory", "", 3686400, h1),
		row(s.b, s.shared, "gpu", "H100", 0.0018, h1),
	)
	wantRows(t, "owner, owned pools, shared", query(owner, owned, s.shared).GetTotals(), ownerShared...)
	wantRows(t, "owner, owned pools, a's pool", query(owner, owned, s.aOwn).GetTotals())
	wantRows(t, "owner, owned pools, deleted pool", query(owner, owned, s.gone).GetTotals())

	// By default: the caller's own usage, the deleted pool's included.
	wantRows(t, "owner, own", query(owner, own, uuid.Nil).GetTotals(),
		row(s.owner, s.shared, "gpu", "H100", 3600), row(s.owner, s.gone, "cpu", "", 3600))
	wantRows(t, "owner, own, shared", query(owner, own, s.shared).GetTotals(), row(s.owner, s.shared, "gpu", "H100", 3600))
	aShared := []string{
		sick(row(s.a, s.shared, "gpu", "H100", 7200), 1800), row(s.a, s.shared, "cpu", "", 36000), row(s.a, s.shared, "memory", "", 3686400),
	}
	res = query(a, own, uuid.Nil)
	wantRows(t, "a, own", res.GetTotals(), append(slices.Clone(aShared),
		row(s.a, s.aOwn, "gpu", "A100", 100), row(s.a, s.gone, "gpu", "H100", 360))...)
	wantRows(t, "a, own, hourly", res.GetHours(),
		sick(row(s.a, s.shared, "gpu", "H100", 7200, h0), 1800), row(s.a, s.shared, "cpu", "", 36000, h0), row(s.a, s.shared, "memory", "", 3686400, h1),
		row(s.a, s.aOwn, "gpu", "A100", 100, h0), row(s.a, s.gone, "gpu", "H100", 360, h0))
	res = query(a, own, s.shared)
	wantRows(t, "a, own, the owner's pool", res.GetTotals(), aShared...)
	wantRows(t, "a, own, the owner's pool, hourly", res.GetHours(),
		sick(row(s.a, s.shared, "gpu", "H100", 7200, h0), 1800), row(s.a, s.shared, "cpu", "", 36000, h0), row(s.a, s.shared, "memory", "", 3686400, h1))
	wantRows(t, "b, own, the owner's pool", query(b, own, s.shared).GetTotals(), row(s.b, s.shared, "gpu", "H100", 0.0018))

	// A grantee's owned pools are its own, not the ones granted to it.
	wantRows(t, "a, owned pools", query(a, owned, uuid.Nil).GetTotals(), row(s.a, s.aOwn, "gpu", "A100", 100))
	wantRows(t, "a, owned pools, the owner's pool", query(a, owned, s.shared).GetTotals())
	res = query(b, owned, s.shared)
	wantRows(t, "b, owned pools, the owner's pool", res.GetTotals())
	wantRows(t, "b, owned pools, the owner's pool, hourly", res.GetHours())

	_, err := owner.Query(ctx, &usagev1.QueryRequest{StartTime: start, EndTime: end, Scope: 7})
	wantField(t, err, connect.CodeInvalidArgument, "scope")
}

// csvRecord is an export row as "tenant pool pool_name resource model quantity unit
// unhealthy_quantity active_quantity mean_utilization"; the unhealthy quantity is 0.000000
// unless given, and the active quantity 0.000000 and mean utilisation empty (no samples).
func csvRecord(tenant, pool uuid.UUID, poolName, resource, model, quantity, unit string, unhealthy ...string) []string {
	sick := "0.000000"
	if len(unhealthy) > 0 {
		sick = unhealthy[0]
	}
	return []string{tenant.String(), pool.String(), poolName, resource, model, quantity, unit, sick, "0.000000", ""}
}

// active is csvRecord r with its active quantity and mean utilisation.
func active(r []string, quantity, mean string) []string {
	r = slices.Clone(r)
	r[len(r)-2], r[len(r)-1] = quantity, mean
	return r
}

// wantExport compares an export's records (without the period columns, which it checks) with
// want, in order.
func wantExport(t *testing.T, what string, got [][]string, want ...[]string) {
	t.Helper()
	var trimmed [][]string
	for _, r := range got {
		if len(r) != 12 || r[0] != "2031-03-01T00:00:00Z" || r[1] != "2031-03-02T00:00:00Z" {
			t.Errorf("%s: record %q", what, r)
			continue
		}
		trimmed = append(trimmed, r[2:])
	}
	// The order of an export: tenant, pool, resource, model.
	slices.SortStableFunc(want, func(a, b []string) int {
		return cmp.Or(strings.Compare(a[0], b[0]), strings.Compare(a[1], b[1]), strings.Compare(a[3], b[3]), strings.Compare(a[4], b[4]))
	})
	if !slices.EqualFunc(trimmed, want, slices.Equal) {
		t.Errorf("%s:\n got %q\nwant %q", what, trimmed, want)
	}
}

// TestExport reads exports back with encoding/csv and encoding/json: hours computed exactly
// from the amounts (7200 GPU-seconds are 2 GPU-hours, 1 GiB for an hour is 3686400
// MiB-seconds, half a millionth of an hour rounds up), the period on every row, the pool's name
// (empty once deleted), the GPU-hours held on an unhealthy GPU in the last column, and the same
// scopes as Query.
func TestExport(t *testing.T) {
	t.Parallel()
	s := newSharing(t)
	owner, a := s.client(s.env.AdminKey), s.client(s.aKey)

	res, err := owner.Export(ctx, &usagev1.ExportRequest{StartTime: start, EndTime: end, Scope: usagev1.Scope_SCOPE_OWNED_POOLS})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetContentType() != usage.ContentTypeCSV || res.GetRows() != 5 {
		t.Errorf("content type %q, %d rows", res.GetContentType(), res.GetRows())
	}
	records, err := csv.NewReader(bytes.NewReader(res.GetData())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(records) == 0 || !slices.Equal(records[0], []string{"period_start", "period_end", "tenant_id", "pool_id", "pool_name", "resource", "model", "quantity", "unit", "unhealthy_quantity", "active_quantity", "mean_utilization"}) {
		t.Fatalf("header of %q", records)
	}
	wantExport(t, "owner, owned pools, csv", records[1:],
		csvRecord(s.owner, s.shared, "shared", "gpu", "H100", "1.000000", "gpu-hours"),
		csvRecord(s.a, s.shared, "shared", "gpu", "H100", "2.000000", "gpu-hours", "0.500000"),
		csvRecord(s.a, s.shared, "shared", "cpu", "", "10.000000", "cpu-hours"),
		csvRecord(s.a, s.shared, "shared", "memory", "", "1.000000", "gib-hours"),
		csvRecord(s.b, s.shared, "shared", "gpu", "H100", "0.000001", "gpu-hours"),
	)

	res, err = a.Export(ctx, &usagev1.ExportRequest{StartTime: start, EndTime: end, Format: usagev1.ExportFormat_EXPORT_FORMAT_JSONL})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetContentType() != usage.ContentTypeJSONL || res.GetRows() != 5 {
		t.Errorf("content type %q, %d rows", res.GetContentType(), res.GetRows())
	}
	got := jsonlRecords(t, res.GetData())
	if n := bytes.Count(res.GetData(), []byte("\n")); n != 5 {
		t.Errorf("%d lines in %q", n, res.GetData())
	}
	wantExport(t, "a, own, jsonl", got,
		csvRecord(s.a, s.shared, "shared", "gpu", "H100", "2.000000", "gpu-hours", "0.500000"),
		csvRecord(s.a, s.shared, "shared", "cpu", "", "10.000000", "cpu-hours"),
		csvRecord(s.a, s.shared, "shared", "memory", "", "1.000000", "gib-hours"),
		csvRecord(s.a, s.aOwn, "a-own", "gpu", "A100", "0.027778", "gpu-hours"),
		csvRecord(s.a, s.gone, "", "gpu", "H100", "0.100000", "gpu-hours"),
	)

	// A grantee filtering by the owner's pool exports only its own usage there.
	res, err = a.Export(ctx, &usagev1.ExportRequest{StartTime: start, EndTime: end, PoolId: s.shared.String(), Format: usagev1.ExportFormat_EXPORT_FORMAT_CSV})
	if err != nil {
		t.Fatal(err)
	}
	records, err = csv.NewReader(bytes.NewReader(res.GetData())).ReadAll()
	if err != nil || len(records) == 0 {
		t.Fatalf("%q, %v", records, err)
	}
	wantExport(t, "a, own, the owner's pool", records[1:],
		csvRecord(s.a, s.shared, "shared", "gpu", "H100", "2.000000", "gpu-hours", "0.500000"),
		csvRecord(s.a, s.shared, "shared", "cpu", "", "10.000000", "cpu-hours"),
		csvRecord(s.a, s.shared, "shared", "memory", "", "1.000000", "gib-hours"),
	)
	res, err = a.Export(ctx, &usagev1.ExportRequest{StartTime: start, EndTime: end, PoolId: s.shared.String(), Scope: usagev1.Scope_SCOPE_OWNED_POOLS})
	if err != nil || res.GetRows() != 0 || string(res.GetData()) != "period_start,period_end,tenant_id,pool_id,pool_name,resource,model,quantity,unit,unhealthy_quantity,active_quantity,mean_utilization\n" {
		t.Errorf("a, owned pools, the owner's pool: %v, %v", res, err)
	}

	// Validated as Query is.
	for _, tc := range []struct {
		req   *usagev1.ExportRequest
		field string
	}{
		{&usagev1.ExportRequest{EndTime: end}, "start_time"},
		{&usagev1.ExportRequest{StartTime: end, EndTime: start}, "end_time"},
		{&usagev1.ExportRequest{StartTime: start, EndTime: timestamppb.New(day.Add(usage.MaxPeriod + time.Hour))}, "end_time"},
		{&usagev1.ExportRequest{StartTime: start, EndTime: end, PoolId: "x"}, "pool_id"},
		{&usagev1.ExportRequest{StartTime: start, EndTime: end, Scope: 2}, "scope"},
		{&usagev1.ExportRequest{StartTime: start, EndTime: end, Format: 3}, "format"},
	} {
		_, err := owner.Export(ctx, tc.req)
		wantField(t, err, connect.CodeInvalidArgument, tc.field)
	}
}

// TestExportRefusesMoreThanTheRowLimit: a period of MaxExportRows+1 rows is refused in either
// scope, naming end_time, rather than cut short. The rows are written for real instead of
// lowering the limit for the test, so it checks the limit the API has. It does not export
// exactly MaxExportRows rows: encoding and carrying them takes over 10 seconds under -race.
func TestExportRefusesMoreThanTheRowLimit(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	tenant := capacitytest.RootTenant(t, env.Pool)
	pool := capacitytest.Pool(t, env.Pool, tenant, "big", nil)
	if _, err := env.Pool.Exec(ctx, `
		INSERT INTO usage_hourly (tenant_id, hour, pool_id, resource, model, amount, records)
		SELECT $1, $2, $3, 'gpu', 'm' || i, 3600, 1 FROM generate_series(1, $4::integer) AS i`,
		tenant, h0, pool, usage.MaxExportRows+1); err != nil {
		t.Fatal(err)
	}
	c := usagev1connect.NewUsageServiceClient(env.HTTPClient(env.AdminKey), env.URL)
	for _, scope := range []usagev1.Scope{usagev1.Scope_SCOPE_UNSPECIFIED, usagev1.Scope_SCOPE_OWNED_POOLS} {
		_, err := c.Export(ctx, &usagev1.ExportRequest{StartTime: start, EndTime: end, Scope: scope, PageSize: usage.MaxExportPageRows})
		wantField(t, err, connect.CodeFailedPrecondition, "end_time")
		if err != nil && !strings.Contains(err.Error(), "narrow the period or pick a pool") {
			t.Errorf("message %q", err)
		}
	}
	// The hour before has none of them.
	res, err := c.Export(ctx, &usagev1.ExportRequest{StartTime: timestamppb.New(h0.Add(-time.Hour)), EndTime: timestamppb.New(h0)})
	if err != nil || res.GetRows() != 0 {
		t.Errorf("the hour before: %v, %v", res, err)
	}
}

// jsonlRecords decodes a JSONL export into records in the CSV's column order, checking that
// every line has exactly the export's keys, that the quantities are JSON numbers with their
// decimals as written, and that meanUtilization is a number or null ("" in the record).
func jsonlRecords(t *testing.T, data []byte) [][]string {
	t.Helper()
	keys := []string{"periodStart", "periodEnd", "tenantId", "poolId", "poolName", "resource", "model", "quantity", "unit", "unhealthyQuantity", "activeQuantity", "meanUtilization"}
	var got [][]string
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var obj map[string]json.RawMessage
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(slices.Sorted(maps.Keys(obj)), slices.Sorted(slices.Values(keys))) {
			t.Fatalf("keys of %v", obj)
		}
		var r []string
		for _, k := range keys {
			var v string
			switch {
			case k == "meanUtilization" && string(obj[k]) == "null":
			case k == "quantity" || k == "unhealthyQuantity" || k == "activeQuantity" || k == "meanUtilization":
				// A JSON number, with its decimals as written.
				var n json.Number
				if err := json.Unmarshal(obj[k], &n); err != nil || string(obj[k]) != n.String() {
					t.Fatalf("%s %s is not a JSON number: %v", k, obj[k], err)
				}
				v = n.String()
			default:
				if err := json.Unmarshal(obj[k], &v); err != nil {
					t.Fatalf("%s: %v", k, err)
				}
			}
			r = append(r, v)
		}
		got = append(got, r)
	}
	return got
}
