package sdk_test

import (
	"bytes"
	"encoding/csv"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/client"
	usagev1 "github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/server/servertest"
)

// TestExportUsagePages: ExportUsage follows the pages of usage/export and writes them as one
// CSV, the header once.
func TestExportUsagePages(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	ctx := t.Context()
	tenant := capacitytest.RootTenant(t, env.Pool)
	pool := capacitytest.Pool(t, env.Pool, tenant, "p", nil)
	hour := time.Date(2031, 3, 1, 10, 0, 0, 0, time.UTC)
	if _, err := env.Pool.Exec(ctx, `
		INSERT INTO usage_hourly (tenant_id, hour, pool_id, resource, model, amount, records)
		SELECT $1, $2, $3, 'gpu', 'm' || lpad(i::text, 2, '0'), 3600, 1 FROM generate_series(1, 25) AS i`,
		tenant, hour, pool); err != nil {
		t.Fatal(err)
	}
	c := client.New(env.URL+"/", client.WithAPIKey(env.AdminKey))
	var buf bytes.Buffer
	n, err := c.ExportUsage(ctx, &usagev1.ExportRequest{
		StartTime: timestamppb.New(hour), EndTime: timestamppb.New(hour.Add(time.Hour)), PageSize: 10,
	}, &buf)
	if err != nil || n != 25 {
		t.Fatalf("%d rows, %v", n, err)
	}
	records, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != 26 || records[0][0] != "period_start" || records[1][6] != "m01" || records[25][6] != "m25" {
		t.Errorf("%d records: %q", len(records), records)
	}
}
