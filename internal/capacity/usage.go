package capacity

import (
	"context"
	"fmt"
	"time"

	"github.com/better-compute/better-compute/gen/db"
)

// UsageBacklog reports the metering records not yet in the hourly totals (the metering worker,
// workers/internal/metering, folds them in) and the age of the oldest, for usage/query, doctor and
// metrics. q may be a pool or a transaction.
func UsageBacklog(ctx context.Context, q db.DBTX) (records int64, oldest time.Duration, err error) {
	row, err := db.New(q).UsageBacklog(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("usage backlog: %w", err)
	}
	return row.Records, time.Duration(row.OldestAgeSeconds * float64(time.Second)), nil
}
