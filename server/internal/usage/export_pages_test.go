package usage_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	usagev1 "github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1/usagev1connect"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/guard"
	"github.com/better-compute/better-compute/server/internal/usage"
	"github.com/better-compute/better-compute/server/servertest"
)

// manyRows inserts n usage rows of tenant in one new pool, each its own export row (models m1 to
// mn, in one hour), with one set-based statement, and returns the pool.
func manyRows(t *testing.T, pool *pgxpool.Pool, tenant uuid.UUID, n int) uuid.UUID {
	t.Helper()
	p := capacitytest.Pool(t, pool, tenant, "big", nil)
	if _, err := pool.Exec(ctx, `
		INSERT INTO usage_hourly (tenant_id, hour, pool_id, resource, model, amount, records)
		SELECT $1, $2, $3, 'gpu', 'm' || lpad(i::text, 6, '0'), 3600, 1 FROM generate_series(1, $4::integer) AS i`,
		tenant, h0, p, n); err != nil {
		t.Fatal(err)
	}
	return p
}

// principalOf is a principal of tenant, as the guard would have authenticated, for calls of the
// handler itself.
func principalOf(tenant uuid.UUID) *auth.Principal {
	return &auth.Principal{ID: uuid.New(), TenantID: tenant, Kind: "service_account", Name: "test"}
}

// TestExportRefusedBeforeReadingRows: a period over the row cap is refused (naming end_time and
// the limit) by a bounded count, before a single row is read or summed; so is a period of more
// than one page asked for without page_size (naming page_size). The export read 100,001
// rows and encoded them before it refused.
func TestExportRefusedBeforeReadingRows(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	tenant := capacitytest.RootTenant(t, env.Pool)
	manyRows(t, env.Pool, tenant, usage.MaxExportRows+1)
	svc := usage.New(env.Pool)
	cctx := auth.WithPrincipal(ctx, principalOf(tenant))
	for _, scope := range []usagev1.Scope{usagev1.Scope_SCOPE_UNSPECIFIED, usagev1.Scope_SCOPE_OWNED_POOLS} {
		_, err := svc.Export(cctx, &usagev1.ExportRequest{StartTime: start, EndTime: end, Scope: scope, PageSize: 1000})
		err = wire(err)
		wantField(t, err, connect.CodeFailedPrecondition, "end_time")
		if err == nil || !bytes.Contains([]byte(err.Error()), []byte(strconv.Itoa(usage.MaxExportRows))) {
			t.Errorf("scope %v: %v does not name the limit", scope, err)
		}
		_, err = svc.Export(cctx, &usagev1.ExportRequest{StartTime: start, EndTime: end, Scope: scope})
		wantField(t, wire(err), connect.CodeFailedPrecondition, "page_size")
	}
	if n := svc.RowsRead(); n != 0 {
		t.Errorf("the refused exports read %d rows", n)
	}
}

// TestExportPages: an export of 20,000 rows comes in pages of at most page_size rows (a larger
// page_size is capped at MaxExportPageRows), each call reading no more than its page and one row
// to learn that another follows, so a call's memory does not grow with the period; the pages
// concatenated are the whole export, in order, each row once, the CSV header once.
func TestExportPages(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	tenant := capacitytest.RootTenant(t, env.Pool)
	const n = 20_000
	pool := manyRows(t, env.Pool, tenant, n)
	svc := usage.New(env.Pool)
	cctx := auth.WithPrincipal(ctx, principalOf(tenant))

	// Without page_size, more than one page is refused rather than cut short.
	_, err := svc.Export(cctx, &usagev1.ExportRequest{StartTime: start, EndTime: end})
	wantField(t, wire(err), connect.CodeFailedPrecondition, "page_size")

	for _, tc := range []struct {
		size, pageRows int32
		pages          int
	}{
		{3000, 3000, 7},
		{1_000_000, usage.MaxExportPageRows, 2},
	} {
		var all bytes.Buffer
		token, pages := "", 0
		for {
			before := svc.RowsRead()
			res, err := svc.Export(cctx, &usagev1.ExportRequest{StartTime: start, EndTime: end, PageSize: tc.size, PageToken: token})
			if err != nil {
				t.Fatalf("page_size %d, page %d: %v", tc.size, pages+1, err)
			}
			pages++
			if res.GetRows() > int64(tc.pageRows) {
				t.Errorf("page_size %d: a page of %d rows", tc.size, res.GetRows())
			}
			if read := svc.RowsRead() - before; read > int64(tc.pageRows)+1 {
				t.Errorf("page_size %d: a page read %d rows", tc.size, read)
			}
			all.Write(res.GetData())
			if token = res.GetNextPageToken(); token == "" {
				break
			}
			if pages > n {
				t.Fatal("the pages do not end")
			}
		}
		if pages != tc.pages {
			t.Errorf("page_size %d: %d pages, want %d", tc.size, pages, tc.pages)
		}
		records, err := csv.NewReader(&all).ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		if len(records) != n+1 || records[0][0] != "period_start" {
			t.Fatalf("page_size %d: %d records, first %q", tc.size, len(records), records[0])
		}
		for i, r := range records[1:] {
			if want := fmt.Sprintf("m%06d", i+1); r[3] != pool.String() || r[6] != want || r[7] != "1.000000" {
				t.Fatalf("page_size %d: record %d is %q, want model %s", tc.size, i+1, r, want)
			}
		}
	}

	// Over the wire, JSON lines: the same pages.
	c := usagev1connect.NewUsageServiceClient(env.HTTPClient(env.AdminKey), env.URL)
	var lines, pages int
	token := ""
	for {
		res, err := c.Export(ctx, &usagev1.ExportRequest{StartTime: start, EndTime: end, PageSize: usage.MaxExportPageRows, PageToken: token, Format: usagev1.ExportFormat_EXPORT_FORMAT_JSONL})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		lines += bytes.Count(res.GetData(), []byte("\n"))
		if token = res.GetNextPageToken(); token == "" {
			break
		}
	}
	if lines != n || pages != 2 {
		t.Errorf("JSONL over the wire: %d lines in %d pages", lines, pages)
	}
	// A malformed token is refused, naming it.
	_, err = c.Export(ctx, &usagev1.ExportRequest{StartTime: start, EndTime: end, PageSize: 10, PageToken: "x"})
	wantField(t, err, connect.CodeInvalidArgument, "page_token")
}

// TestExpensiveCallsPerTenant: a tenant's expensive calls beyond rateLimits.expensiveCallsPerTenant
// (default 2) at once are refused with resource_exhausted and Retry-After before any work, while
// another tenant's call still goes through; the slots come back when the calls end. The calls are
// held in flight by a lock on usage_hourly, so no timing decides the outcome.
func TestExpensiveCallsPerTenant(t *testing.T) {
	t.Parallel()
	s := newSharing(t)
	lock, err := s.env.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, `LOCK TABLE usage_hourly IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	a, b := s.client(s.aKey), s.client(s.bKey)
	req := &usagev1.ExportRequest{StartTime: start, EndTime: end}
	done := make(chan error, guard.DefaultExpensiveCallsPerTenant+1)
	for range guard.DefaultExpensiveCallsPerTenant {
		go func() {
			_, err := a.Export(ctx, req)
			done <- err
		}()
	}
	waitBlocked(t, s.env.Pool, guard.DefaultExpensiveCallsPerTenant)

	// One more of a's is refused at once, whichever expensive method. (Without the bound it
	// would wait on the lock: the deadline only ends the test then.)
	over, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = a.Export(over, req)
	wantExhausted(t, err)
	_, err = a.Query(over, &usagev1.QueryRequest{StartTime: start, EndTime: end})
	wantExhausted(t, err)

	// b's goes through the guard: it waits on the lock with a's.
	go func() {
		_, err := b.Export(ctx, req)
		done <- err
	}()
	waitBlocked(t, s.env.Pool, guard.DefaultExpensiveCallsPerTenant+1)

	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for range guard.DefaultExpensiveCallsPerTenant + 1 {
		if err := <-done; err != nil {
			t.Errorf("a call held by the lock: %v", err)
		}
	}
	// The slots came back.
	if _, err := a.Export(ctx, req); err != nil {
		t.Errorf("after the calls ended: %v", err)
	}
}

// waitBlocked waits until n queries of this test's database wait on a lock.
func waitBlocked(t *testing.T, pool *pgxpool.Pool, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got int
		if err := pool.QueryRow(ctx, `
			SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%usage_hourly%'`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls wait on the lock, want %d", got, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wire is err as the guard answers it.
func wire(err error) error {
	if err == nil {
		return nil
	}
	cerr, _ := apierr.ToConnect(err, "test")
	return cerr
}

func wantExhausted(t *testing.T, err error) {
	t.Helper()
	var cerr *connect.Error
	if !errors.As(err, &cerr) || cerr.Code() != connect.CodeResourceExhausted {
		t.Fatalf("got %v, want resource_exhausted", err)
	}
	if ra := cerr.Meta().Get(guard.RetryAfterHeader); ra != "1" {
		t.Errorf("Retry-After %q, want 1", ra)
	}
}

// TestQueryRefusesMoreThanTheTotalsLimit: a query whose period has more than MaxTotalRows totals
// is refused, naming end_time, rather than answering them all (or a part read as the whole).
func TestQueryRefusesMoreThanTheTotalsLimit(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	tenant := capacitytest.RootTenant(t, env.Pool)
	manyRows(t, env.Pool, tenant, usage.MaxTotalRows+1)
	c := usagev1connect.NewUsageServiceClient(env.HTTPClient(env.AdminKey), env.URL)
	for _, scope := range []usagev1.Scope{usagev1.Scope_SCOPE_UNSPECIFIED, usagev1.Scope_SCOPE_OWNED_POOLS} {
		_, err := c.Query(ctx, &usagev1.QueryRequest{StartTime: start, EndTime: end, Scope: scope})
		wantField(t, err, connect.CodeFailedPrecondition, "end_time")
	}
}
