package usage

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	usagev1 "github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/page"
)

// MaxExportRows is the most rows one export has; a period with more is refused, before any row
// is read, rather than cut short, since a billing system must not read a partial export as
// complete.
const MaxExportRows = 100_000

// MaxExportPageRows is the most rows one Export call reads and encodes (a page): what bounds the
// memory of a call, whatever the period holds. A larger page_size is capped to it; a call
// without page_size is refused when the period has more.
const MaxExportPageRows = 10_000

// Content types of exports.
const (
	ContentTypeCSV   = "text/csv; charset=utf-8"
	ContentTypeJSONL = "application/jsonl"
)

// csvHeader is the first line of a CSV export, in the order of exportRow's fields.
var csvHeader = []string{"period_start", "period_end", "tenant_id", "pool_id", "pool_name", "resource", "model", "quantity", "unit", "unhealthy_quantity", "active_quantity", "mean_utilization"}

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
	// UnhealthyQuantity is the part of Quantity held on a GPU while the GPU was unhealthy, in
	// the same unit and with as many decimals: what a credit is computed from. Last, so that a
	// reader of the columns before it by position reads them as before.
	UnhealthyQuantity json.Number `json:"unhealthyQuantity"`
	// ActiveQuantity is the GPU-hours the daemons saw active in the same tenant, pool, model and
	// hours, with as many decimals; 0 for cpu and memory and GPUs without samples. After the
	// columns before it, for the same reason.
	ActiveQuantity json.Number `json:"activeQuantity"`
	// MeanUtilization is the mean utilisation of the GPU-minutes sampled, percent with 2
	// decimals; nil (an empty CSV field, a JSON null) for cpu and memory and without samples.
	MeanUtilization *json.Number `json:"meanUtilization"`
	// key is the row's place in the export order, for the next page's token.
	key *exportKey
}

func (r exportRow) csv() []string {
	mean := ""
	if r.MeanUtilization != nil {
		mean = r.MeanUtilization.String()
	}
	return []string{r.PeriodStart, r.PeriodEnd, r.TenantID, r.PoolID, r.PoolName, r.Resource, r.Model, r.Quantity.String(), r.Unit, r.UnhealthyQuantity.String(), r.ActiveQuantity.String(), mean}
}

// exportKey is the export order's key of a row, which a page token holds: the last row of the
// previous page.
type exportKey struct {
	Tenant   uuid.UUID `json:"t"`
	Pool     uuid.UUID `json:"p"`
	Resource string    `json:"r"`
	Model    string    `json:"m"`
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

// Export returns a page of a period's usage, encoded for a billing system: one row per tenant,
// pool, resource and model, in the order of those, with the quantity in hours (GPU-hours,
// CPU-hours, GiB-hours) rounded to 6 decimals, half away from zero, from the exact amounts, and
// the part of it held on an unhealthy GPU (unhealthy_quantity), in the same unit, rounded the
// same way. It
// reads the same usage as Query with the same scope (see Query for what each scope covers:
// usage of a deleted pool is not in the owned-pools scope, and has an empty pool name in the
// default one).
//
// What a call holds is bounded whatever the period holds: the first page first counts the
// period's rows (up to the limit only) and refuses a period of more than MaxExportRows, or,
// without page_size, of more than MaxExportPageRows, before it reads any; then each call reads
// and encodes at most one page.
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
	size, paged := req.GetPageSize(), req.GetPageSize() != 0
	switch {
	case size < 0:
		return nil, apierr.InvalidArgument("page_size", "must not be negative")
	case size == 0 || size > MaxExportPageRows:
		size = MaxExportPageRows
	}
	after, err := page.Parse[*exportKey](req.GetPageToken(), nil)
	if err != nil {
		return nil, err
	}
	q := db.New(s.pool)
	tenant := auth.Caller(ctx).TenantID
	if after == nil {
		// The first page counts. A later page does not: it costs what a count would (both
		// aggregate the period's rows after the key), and a forged token gains nothing but pages
		// of the caller's own usage.
		if err := checkExportRows(ctx, q, tenant, f, after, paged); err != nil {
			return nil, err
		}
	}
	rows, err := s.exportRows(ctx, q, tenant, f, after, size+1)
	if err != nil {
		return nil, err
	}
	rows, next := page.Next(rows, size, func(r exportRow) *exportKey { return r.key })
	var data []byte
	contentType := ContentTypeCSV
	if format == usagev1.ExportFormat_EXPORT_FORMAT_JSONL {
		contentType = ContentTypeJSONL
		data, err = encodeJSONL(rows)
	} else {
		data, err = encodeCSV(rows, after == nil)
	}
	if err != nil {
		return nil, err
	}
	return &usagev1.ExportResponse{ContentType: contentType, Data: data, Rows: int64(len(rows)), NextPageToken: next}, nil
}

// checkExportRows refuses an export of more than MaxExportRows rows after the key, or, unpaged,
// of more than MaxExportPageRows, counting them up to that limit only (no row is read, nor a sum
// taken), so a refusal costs a fraction of the export.
func checkExportRows(ctx context.Context, q *db.Queries, tenant uuid.UUID, f filter, after *exportKey, paged bool) error {
	limit := int32(MaxExportRows)
	if !paged {
		limit = MaxExportPageRows
	}
	var at db.CountExportUsageParams
	at.TenantID, at.StartsAt, at.EndsAt, at.PoolID, at.Lim = tenant, f.start, f.end, f.poolID, limit+1
	if after != nil {
		at.AfterTenantID, at.AfterPoolID, at.AfterResource, at.AfterModel = &after.Tenant, after.Pool, after.Resource, after.Model
	}
	var n int64
	var err error
	if f.ownedPools {
		n, err = q.CountExportOwnedPoolsUsage(ctx, db.CountExportOwnedPoolsUsageParams(at))
	} else {
		n, err = q.CountExportUsage(ctx, at)
	}
	switch {
	case err != nil:
		return fmt.Errorf("count the export's rows: %w", err)
	case n <= int64(limit):
		return nil
	case paged:
		return apierr.FailedPreconditionField("end_time", "the period has more than %d rows: narrow the period or pick a pool", MaxExportRows)
	default:
		return apierr.FailedPreconditionField("page_size", "the period has more than %d rows, more than one page: set page_size and follow next_page_token, or narrow the period", MaxExportPageRows)
	}
}

// exportRows reads up to lim rows of an export after the key, in hours.
func (s *Service) exportRows(ctx context.Context, q *db.Queries, tenant uuid.UUID, f filter, after *exportKey, lim int32) ([]exportRow, error) {
	var at db.ExportUsageParams
	at.TenantID, at.StartsAt, at.EndsAt, at.PoolID, at.Lim = tenant, f.start, f.end, f.poolID, lim
	if after != nil {
		at.AfterTenantID, at.AfterPoolID, at.AfterResource, at.AfterModel = &after.Tenant, after.Pool, after.Resource, after.Model
	}
	var sums []db.ExportUsageRow
	var err error
	if f.ownedPools {
		var owned []db.ExportOwnedPoolsUsageRow
		owned, err = q.ExportOwnedPoolsUsage(ctx, db.ExportOwnedPoolsUsageParams(at))
		sums = make([]db.ExportUsageRow, 0, len(owned))
		for _, r := range owned {
			sums = append(sums, db.ExportUsageRow(r)) // the same columns
		}
	} else {
		sums, err = q.ExportUsage(ctx, at)
	}
	if err != nil {
		return nil, fmt.Errorf("read the export's rows: %w", err)
	}
	s.rowsRead.Add(int64(len(sums)))
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
		unhealthy, err := hours(u.UnhealthyAmount, unit.perUnit)
		if err != nil {
			return nil, fmt.Errorf("unhealthy usage of pool %s: %w", u.PoolID, err)
		}
		active, err := hours(u.ActiveAmount, unit.perUnit)
		if err != nil {
			return nil, fmt.Errorf("active usage of pool %s: %w", u.PoolID, err)
		}
		var mean *json.Number
		if m := meanUtilization(u.UtilSum, u.UtilGpus); m != nil {
			n := json.Number(strconv.FormatFloat(*m, 'f', 2, 64))
			mean = &n
		}
		rows = append(rows, exportRow{
			PeriodStart: start, PeriodEnd: end, TenantID: u.TenantID.String(), PoolID: u.PoolID.String(), PoolName: u.PoolName,
			Resource: u.Resource, Model: u.Model, Quantity: json.Number(quantity), Unit: unit.name, UnhealthyQuantity: json.Number(unhealthy),
			ActiveQuantity: json.Number(active), MeanUtilization: mean,
			key: &exportKey{Tenant: u.TenantID, Pool: u.PoolID, Resource: u.Resource, Model: u.Model},
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

// encodeCSV writes RFC 4180 CSV, with the header line when header is set (the first page).
func encodeCSV(rows []exportRow, header bool) ([]byte, error) {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if header {
		if err := w.Write(csvHeader); err != nil {
			return nil, fmt.Errorf("encode csv: %w", err)
		}
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
