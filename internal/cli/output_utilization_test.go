package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	usagev1 "github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1"
)

// TestLeaseTablesShowUtilization: `leases get` shows a lease's utilisation and when it went
// idle, `leases list` has them as columns, and `usage utilization` prints its points as a table.
func TestLeaseTablesShowUtilization(t *testing.T) {
	t.Parallel()
	idle := time.Date(2031, 3, 1, 10, 0, 0, 0, time.UTC)
	lease := &leasesv1.Lease{
		Id: "l1", PoolId: "p1", State: leasesv1.LeaseState_LEASE_STATE_PLACED, Gpus: 2, Duration: durationpb.New(time.Hour),
		Utilization: &leasesv1.Utilization{GpuSecondsHeld: 7200, GpuSecondsActive: 3600, MeanUtilization: 42.5, SampledMinutes: 60},
		IdleSince:   timestamppb.New(idle),
	}
	var out bytes.Buffer
	if err := printResponse(&out, "table", &leasesv1.GetResponse{Lease: lease}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for line := range strings.Lines(out.String()) {
		if k, v, ok := strings.Cut(line, ":"); ok {
			got[k] = strings.TrimSpace(v)
		}
	}
	for k, v := range map[string]string{"utilization.meanUtilization": "42.5", "utilization.gpuSecondsActive": "3600", "idleSince": "2031-03-01T10:00:00Z"} {
		if got[k] != v {
			t.Errorf("leases get: %s is %q, want %q, in\n%s", k, got[k], v, out.String())
		}
	}
	out.Reset()
	if err := printResponse(&out, "table", &leasesv1.ListResponse{Leases: []*leasesv1.Lease{lease}}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if !strings.Contains(lines[0], "UTILIZATION_MEAN_UTILIZATION") || !strings.Contains(lines[0], "IDLE_SINCE") ||
		!strings.Contains(lines[1], "42.5") || !strings.Contains(lines[1], "2031-03-01T10:00:00Z") {
		t.Errorf("leases list:\n%s", out.String())
	}
	out.Reset()
	if err := printResponse(&out, "table", &usagev1.UtilizationResponse{Points: []*usagev1.UtilizationPoint{
		{Time: timestamppb.New(idle), HeldGpus: 2, ActiveShare: 0.5, MeanUtilization: 42.5, PeakMemoryBytes: 1 << 30},
	}}); err != nil {
		t.Fatal(err)
	}
	lines = strings.Split(out.String(), "\n")
	if !strings.Contains(lines[0], "HELD_GPUS") || !strings.Contains(lines[0], "ACTIVE_SHARE") || !strings.Contains(lines[1], "0.5") {
		t.Errorf("usage utilization:\n%s", out.String())
	}
}
