package gpuhealth_test

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	gpusv1 "github.com/better-compute/better-compute/gen/go/bettercompute/gpus/v1"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1/poolsv1connect"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/poll"
)

// setPolicy replaces the GPU health policy of the drill's pool.
func (d *drill) setPolicy(t *testing.T, p *poolsv1.GpuHealthPolicy) {
	t.Helper()
	if _, err := d.pools().Update(ctx, &poolsv1.UpdateRequest{
		Id: d.pool, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"gpu_health_policy"}}, GpuHealthPolicy: p,
	}); err != nil {
		t.Fatal(err)
	}
}

func (d *drill) pools() poolsv1connect.PoolsServiceClient {
	return poolsv1connect.NewPoolsServiceClient(d.env.HTTPClient(d.env.AdminKey), d.env.URL)
}

// injectXid reports an Xid on GPU index of host.
func (d *drill) injectXid(t *testing.T, host string, index int, code int64) string {
	t.Helper()
	gpu := fmt.Sprintf("GPU-%s-%d", host, index)
	now := timestamppb.Now()
	if err := d.fakes[host].InjectGPUSignal(&daemonv1.GpuSignal{
		GpuUuid: gpu, Check: gpuhealth.CheckXid, Code: code, Count: 1, FirstSeen: now, LastSeen: now,
		Detail: fmt.Sprintf("NVRM: Xid: %d", code),
	}); err != nil {
		t.Fatal(err)
	}
	return gpu
}

// reconciled waits until host's report carries n signals and the health reconciler has no node
// due.
func (d *drill) reconciled(t *testing.T, host string, n int) {
	t.Helper()
	poll.Until(t, 10*time.Second, fmt.Sprintf("%d signals of %s are reported and reconciled", n, host), func() bool {
		return d.count(t, `SELECT count(*) FROM node_gpu_health h JOIN nodes n ON n.id = h.node_id
			WHERE n.hostname = $1 AND jsonb_array_length(h.report -> 'signals') = $2`, host, n) == 1 &&
			d.count(t, `SELECT count(*) FROM reconcile_queue WHERE kind = $1 AND due_at <= now()`, gpuhealth.ReconcileKind) == 0
	})
}

// TestPoolPolicyOverride: a pool whose override ignores Xid 79 keeps its GPU healthy; once the
// node is also in a pool without an override, the default's quarantine, the stronger effect,
// holds (one pool cannot weaken what another requires).
func TestPoolPolicyOverride(t *testing.T) {
	t.Parallel()
	d := newDrill(t, "dgx-c")
	d.setPolicy(t, &poolsv1.GpuHealthPolicy{Rules: []*poolsv1.GpuHealthRule{{Check: gpuhealth.CheckXid, Codes: []int64{79}, Effect: string(gpuhealth.EffectIgnore)}}})
	gpu := d.injectXid(t, "dgx-c", 2, 79)
	d.reconciled(t, "dgx-c", 1)
	if g := d.gpu(t, gpu); g.GetHealth() != gpusv1.HealthState_HEALTH_STATE_HEALTHY || len(g.GetReasons()) != 0 {
		t.Fatalf("Xid 79 in a pool that ignores it: %v", g)
	}

	// A second pool of the same node, with the default policy: Xid 79 quarantines the GPU.
	if _, err := d.pools().Create(ctx, &poolsv1.CreateRequest{Name: "strict", NodeSelector: map[string]string{"gpu": "h100"}}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the GPU is unhealthy under the strictest of its pools", func() bool {
		return d.count(t, `SELECT count(*) FROM devices WHERE uuid = $1 AND health = 'unhealthy'`, gpu) == 1
	})
	if g := d.gpu(t, gpu); len(g.GetReasons()) != 1 || g.GetReasons()[0].GetEffect() != string(gpuhealth.EffectQuarantineGPU) {
		t.Fatalf("Xid 79 in two pools: %v", g)
	}
}

// TestPoolEndsLeaseOnUnhealthyGPU: in a pool whose policy ends leases on an unhealthy GPU, an Xid
// 79 on a GPU a lease holds fails the lease (after lease.gpu_unhealthy), frees its other GPUs,
// and the placer places a new lease on them.
func TestPoolEndsLeaseOnUnhealthyGPU(t *testing.T) {
	t.Parallel()
	d := newDrill(t, "dgx-e")
	d.setPolicy(t, &poolsv1.GpuHealthPolicy{OnUnhealthyLease: poolsv1.UnhealthyLeaseAction_UNHEALTHY_LEASE_ACTION_END})
	l := d.lease(t, 8)
	gpu := d.injectXid(t, "dgx-e", 5, 79)
	var ended *leasesv1.Lease
	poll.Until(t, 10*time.Second, "the lease on the unhealthy GPU fails", func() bool {
		res, err := d.leases.Get(ctx, &leasesv1.GetRequest{Id: l.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		ended = res.GetLease()
		return ended.GetState() == leasesv1.LeaseState_LEASE_STATE_FAILED
	})
	if ended.GetReason() != "gpu_unhealthy: xid 79" {
		t.Errorf("the lease's reason: %q", ended.GetReason())
	}
	if g := d.gpu(t, gpu); g.GetHealth() != gpusv1.HealthState_HEALTH_STATE_UNHEALTHY || g.GetLeaseId() != "" {
		t.Fatalf("the GPU after the lease ended: %v", g)
	}
	// Told, then ended: lease.gpu_unhealthy comes before lease.failed.
	if n := d.count(t, `SELECT count(*) FROM outbox u JOIN outbox f ON f.subject = u.subject AND f.type = 'lease.failed' AND f.id > u.id
		WHERE u.type = 'lease.gpu_unhealthy' AND u.subject = $1`, "lease/"+l.GetId()); n != 1 {
		t.Errorf("%d lease.gpu_unhealthy events followed by lease.failed, want 1", n)
	}
	// The placer is woken: the seven healthy GPUs take a new lease.
	seven := d.lease(t, 7)
	if holds(seven, gpu) {
		t.Fatalf("the seven-GPU lease holds the unhealthy GPU: %v", seven.GetAllocations())
	}

	// KEEP (the default) leaves a lease running.
	d.setPolicy(t, &poolsv1.GpuHealthPolicy{OnUnhealthyLease: poolsv1.UnhealthyLeaseAction_UNHEALTHY_LEASE_ACTION_KEEP})
	other := d.injectXid(t, "dgx-e", 1, 79)
	poll.Until(t, 10*time.Second, "the second GPU is unhealthy", func() bool {
		return d.count(t, `SELECT count(*) FROM devices WHERE uuid = $1 AND health = 'unhealthy'`, other) == 1
	})
	res, err := d.leases.Get(ctx, &leasesv1.GetRequest{Id: seven.GetId()})
	if err != nil || res.GetLease().GetState() != leasesv1.LeaseState_LEASE_STATE_PLACED {
		t.Fatalf("a lease kept on an unhealthy GPU: %v, %v", res.GetLease(), err)
	}
}
