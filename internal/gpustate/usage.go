package gpustate

import (
	"context"
	"fmt"
	"time"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/gpuhealth"
)

// markUsage keeps, on the allocation that holds GPU d now, the span during which the GPU is
// unhealthy, so that metering marks the GPU-time held on it for credit (migration 0034): the span
// opens at at when the GPU becomes unhealthy and closes at at when it becomes healthy or degraded
// again. A GPU no lease holds has nothing to mark. Apply calls it when a GPU's health changes.
func markUsage(ctx context.Context, q *db.Queries, d db.LockGPUHealthDevicesRow, health gpuhealth.Health, at time.Time) error {
	if d.LeaseID == nil {
		return nil
	}
	if err := q.MarkAllocationUnhealthy(ctx, db.MarkAllocationUnhealthyParams{
		Unhealthy: health == gpuhealth.Unhealthy, At: at, DeviceID: &d.ID,
	}); err != nil {
		return fmt.Errorf("mark the usage of GPU %s as %s: %w", d.Uuid, health, err)
	}
	return nil
}
