package capacity_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1/leasesv1connect"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/server/servertest"
	"github.com/better-compute/better-compute/workers/internal/placer"
)

func TestPoolsCapacityAndMembership(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	tenant := capacitytest.RootTenant(t, env.Pool)
	h100 := capacitytest.Nodes(t, env.Pool, tenant, 3, capacitytest.NodeSpec{GPUs: 8, Model: "H100", CPUs: 64, MemoryBytes: 512 << 30, Labels: map[string]string{"gpu": "h100"}})
	capacitytest.Nodes(t, env.Pool, tenant, 1, capacitytest.NodeSpec{GPUs: 8, Model: "H100", Labels: map[string]string{"gpu": "h100"}, State: "cordoned"})
	a100 := capacitytest.Nodes(t, env.Pool, tenant, 2, capacitytest.NodeSpec{GPUs: 4, Model: "A100", CPUs: 32, MemoryBytes: 256 << 30})
	c := pools(env)

	created, err := c.Create(ctx, &poolsv1.CreateRequest{
		Name: "mixed", Description: "H100s by label, two A100s by id",
		NodeSelector: map[string]string{"gpu": "h100"}, NodeIds: []string{a100[0].String(), a100[1].String(), a100[0].String()},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := created.GetPool()
	if len(p.GetNodeIds()) != 2 {
		t.Errorf("node ids %v, want deduplicated", p.GetNodeIds())
	}
	capacity := p.GetCapacity()
	if capacity.GetNodes() != 6 || capacity.GetSchedulableNodes() != 5 || capacity.GetCpus() != 3*64+2*32 {
		t.Fatalf("capacity %v", capacity)
	}
	want := map[string][2]int32{"A100": {8, 8}, "H100": {32, 24}}
	for _, g := range capacity.GetGpus() {
		if w := want[g.GetModel()]; g.GetTotal() != w[0] || g.GetSchedulable() != w[1] || g.GetAvailable() != w[1] || g.GetAllocated() != 0 {
			t.Errorf("%s: %v", g.GetModel(), g)
		}
	}
	if len(capacity.GetGpus()) != 2 {
		t.Fatalf("gpus %v", capacity.GetGpus())
	}

	// Leases show as allocated.
	lc := leasesv1connect.NewLeasesServiceClient(env.HTTPClient(env.AdminKey), env.URL)
	if _, err := lc.Create(ctx, &leasesv1.CreateRequest{PoolId: p.GetId(), Gpus: 4, GpuModel: "A100", Duration: durationpb.New(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	_, err = lc.Create(ctx, &leasesv1.CreateRequest{PoolId: p.GetId(), Gpus: 1, Duration: durationpb.New(time.Hour)})
	wantField(t, err, connect.CodeInvalidArgument, "gpu_model") // two models: name one
	if _, err := placer.New(env.Pool, placer.Options{}).ReconcilePool(ctx, p.GetId()); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(ctx, &poolsv1.GetRequest{Id: p.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range got.GetPool().GetCapacity().GetGpus() {
		if g.GetModel() == "A100" && (g.GetAllocated() != 4 || g.GetAvailable() != 4) {
			t.Errorf("A100 after a lease: %v", g)
		}
	}

	// Update: membership by the selector only; a mask is required and checked.
	_, err = c.Update(ctx, &poolsv1.UpdateRequest{Id: p.GetId(), Description: "x"})
	wantField(t, err, connect.CodeInvalidArgument, "update_mask")
	_, err = c.Update(ctx, &poolsv1.UpdateRequest{Id: p.GetId(), UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"name"}}})
	wantField(t, err, connect.CodeInvalidArgument, "update_mask")
	_, err = c.Update(ctx, &poolsv1.UpdateRequest{Id: p.GetId(), NodeIds: []string{uuid.NewString()}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"node_ids"}}})
	wantField(t, err, connect.CodeFailedPrecondition, "node_ids")
	upd, err := c.Update(ctx, &poolsv1.UpdateRequest{Id: p.GetId(), NodeIds: []string{h100[0].String()}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"node_ids"}}})
	if err != nil {
		t.Fatal(err)
	}
	if upd.GetPool().GetDescription() != p.GetDescription() || upd.GetPool().GetCapacity().GetNodes() != 4 {
		t.Fatalf("updated %v", upd.GetPool())
	}

	// Delete is refused while a lease is pending or running.
	_, err = c.Delete(ctx, &poolsv1.DeleteRequest{Id: p.GetId()})
	if connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("delete with a lease: %v", err)
	}
	list, err := c.List(ctx, &poolsv1.ListRequest{})
	if err != nil || len(list.GetPools()) != 1 || list.GetPools()[0].GetCapacity().GetNodes() != 4 {
		t.Fatalf("list %v, %v", list, err)
	}
	var events int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE subject = $1`, "pool/"+p.GetId()).Scan(&events); err != nil || events != 2 {
		t.Errorf("%d pool events (%v), want created and updated", events, err)
	}
}
