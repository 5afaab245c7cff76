package usage

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math/big"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	usagev1 "github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
)

// MaxExportRows is the most rows one export returns; a period with more is refused rather than
// cut short, since a billing system must not read a partial export as complete.
const MaxExportRows = 100_000

// Content types of exports.
const (
	ContentTypeCSV   = "text/csv; charset=utf-8"
	ContentTypeJSONL = "application/jsonl"
)

// csvHeader is the first line of a CSV export, in the order of exportRow's fields.
var csvHeader = []string{"period_start", "period_end", "tenant_id", "pool_id", "pool_name", "resource", "model", "quantity", "unit"}

// exportRow is one line of an export: what a tenant used of one resource (and GPU model) of one
// pool over the period, in hours. Its JSON is a JSONL line.
type exportRow struct {
	PeriodStart string `json:"periodStart"`
	PeriodEnd   string `json:"periodEnd"`
	TenantID    string `json:"tenantId"`
	PoolID      string `json:"poolId"`
	// PoolName is empty when the pool was deleted since.
	PoolName string `json:"poolName"`
	Resource string `json:"resource"`
	Model    string `json:"model"`
	// Quantity is a decimal with 6 digits after the point, a JSON number.
	Quantity json.Number `json:"quantity"`
	Unit     string      `json:"unit"`
}

func (r exportRow) csv() []string {
	return []string{r.PeriodStart, r.PeriodEnd, r.TenantID, r.PoolID, r.PoolName, r.Resource, r.Model, r.Quantity.String(), r.Unit}
}

// units maps a metered resource to its export unit and how many amount units (quantity-seconds,
// MiB-seconds for memory) make one.
var units = map[string]struct {
	name    string
	perUnit int64
}{
	"gpu":    {"gpu-hours", 3600},
	"cpu":    {"cpu-hours", 3600},
	"memory": {"gib-hours", 3600 * 1024},
}

// Export returns a period's usage, encoded for a billing system: one row per tenant, pool,
// resource and model, in the order of those, with the quantity in hours (GPU-hours, CPU-hours,
// GiB-hours) rounded to 6 decimals, half away from zero, from the exact amounts. It reads the
// same usage as Query with the same scope (see Query for what each scope covers: usage of a
// deleted pool is not in the owned-pools scope, and has an empty pool name in the default
// one), and refuses a period of more than MaxExportRows rows rather than cut it short.
func (s *Service) Export(ctx context.Context, req *usagev1.ExportRequest) (*usagev1.ExportResponse, error) {
	f, err := readFilter(req.GetStartTime(), req.GetEndTime(), req.GetPoolId(), req.GetScope())
	if err != nil {
		return nil, err
	}
	format := req.GetFormat()
	switch format {
	case usagev1.ExportFormat_EXPORT_FORMAT_UNSPECIFIED, usagev1.ExportFormat_EXPORT_FORMAT_CSV, usagev1.ExportFormat_EXPORT_FORMAT_JSONL:
	default:
		return nil, apierr.InvalidArgument("format", "must be EXPORT_FORMAT_CSV or EXPORT_FORMAT_JSONL, got %d", format)
	}
	rows, err := exportRows(ctx, db.New(s.pool), auth.Caller(ctx).TenantID, f)
	if err != nil {
		return nil, err
	}
	var data []byte
	contentType := ContentTypeCSV
	if format == usagev1.ExportFormat_EXPORT_FORMAT_JSONL {
		contentType = ContentTypeJSONL
		data, err = encodeJSONL(rows)
	} else {
		data, err = encodeCSV(rows)
	}
	if err != nil {
		return nil, err
	}
	return &usagev1.ExportResponse{ContentType: contentType, Data: data, Rows: int64(len(rows))}, nil
}

// exportRows reads the rows of an export, in hours, and refuses more than MaxExportRows.
func exportRows(ctx context.Context, q *db.Queries, tenant uuid.UUID, f filter) ([]exportRow, error) {
	var sums []db.ExportUsageRow
	var err error
	if f.ownedPools {
		var owned []db.ExportOwnedPoolsUsageRow
		owned, err = q.ExportOwnedPoolsUsage(ctx, db.ExportOwnedPoolsUsageParams{
			TenantID: tenant, StartsAt: f.start, EndsAt: f.end, PoolID: f.poolID, Lim: MaxExportRows + 1,
		})
		for _, r := range owned {
			sums = append(sums, db.ExportUsageRow(r)) // the same columns
		}
	} else {
		sums, err = q.ExportUsage(ctx, db.ExportUsageParams{
			TenantID: tenant, StartsAt: f.start, EndsAt: f.end, PoolID: f.poolID, Lim: MaxExportRows + 1,
		})
	}
	if err != nil {
		return nil, err
	}
	if len(sums) > MaxExportRows {
		return nil, apierr.FailedPreconditionField("end_time", "the period has more than %d rows: narrow the period or pick a pool", MaxExportRows)
	}
	start, end := f.start.UTC().Format(time.RFC3339Nano), f.end.UTC().Format(time.RFC3339Nano)
	rows := make([]exportRow, 0, len(sums))
	for _, u := range sums {
		unit, ok := units[u.Resource]
		if !ok {
			return nil, fmt.Errorf("usage of pool %s: unknown resource %q", u.PoolID, u.Resource)
		}
		quantity, err := hours(u.Amount, unit.perUnit)
		if err != nil {
			return nil, fmt.Errorf("usage of pool %s: %w", u.PoolID, err)
		}
		rows = append(rows, exportRow{
			PeriodStart: start, PeriodEnd: end, TenantID: u.TenantID.String(), PoolID: u.PoolID.String(), PoolName: u.PoolName,
			Resource: u.Resource, Model: u.Model, Quantity: json.Number(quantity), Unit: unit.name,
		})
	}
	return rows, nil
}

// hours converts an exact amount (numeric text, quantity-seconds) to a decimal with 6 digits
// after the point, dividing by perUnit exactly and rounding once: a float could round an amount
// that is exactly half a millionth of an hour either way.
func hours(amount string, perUnit int64) (string, error) {
	r, ok := new(big.Rat).SetString(amount)
	if !ok {
		return "", fmt.Errorf("amount %q is not a decimal", amount)
	}
	return r.Quo(r, big.NewRat(perUnit, 1)).FloatString(6), nil
}

// encodeCSV writes RFC 4180 CSV with the header line.
func encodeCSV(rows []exportRow) ([]byte, error) {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.Write(csvHeader); err != nil {
		return nil, fmt.Errorf("encode csv: %w", err)
	}
	for _, r := range rows {
		if err := w.Write(r.csv()); err != nil {
			return nil, fmt.Errorf("encode csv: %w", err)
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return nil, fmt.Errorf("encode csv: %w", err)
	}
	return buf.Bytes(), nil
}

// encodeJSONL writes one JSON object a line.
func encodeJSONL(rows []exportRow) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			return nil, fmt.Errorf("encode jsonl: %w", err)
		}
	}
	return buf.Bytes(), nil
}
