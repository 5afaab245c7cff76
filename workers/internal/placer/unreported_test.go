package placer_test

import (
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/internal/placement"
)

// TestPlannerWaitsForUnreportedMembers: members that have not reported their inventory yet (a
// node that just joined, as a provisioned machine's does) say nothing of what the pool can hold,
// so a lease waits instead of failing; once a member reported, a lease no member can hold fails.
func TestPlannerWaitsForUnreportedMembers(t *testing.T) {
	t.Parallel()
	now := time.Now()
	lease := func() *placement.Lease {
		return &placement.Lease{ID: uuid.New(), CPUs: 6, Memory: 1 << 30, Duration: time.Hour}
	}
	joining := &placement.Node{ID: uuid.New()}
	if placed, failed, _ := placement.NewPlanner(now, []*placement.Node{joining}, nil).Plan([]*placement.Lease{lease()}); len(placed)+len(failed) != 0 {
		t.Fatalf("unreported member: placed %d, failed %d; want the lease to wait", len(placed), len(failed))
	}
	small := &placement.Node{ID: uuid.New(), Schedulable: true, CPUs: 4, Memory: 8 << 30}
	if _, failed, _ := placement.NewPlanner(now, []*placement.Node{joining, small}, nil).Plan([]*placement.Lease{lease()}); len(failed) != 1 {
		t.Fatalf("a reported member of 4 CPUs: failed %d, want the 6-CPU lease failed", len(failed))
	}
}
