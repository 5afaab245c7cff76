package capacity_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/better-compute/better-compute/client"
	gpusv1 "github.com/better-compute/better-compute/gen/go/bettercompute/gpus/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/gpus/v1/gpusv1connect"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/server/servertest"
	"github.com/better-compute/better-compute/workers/internal/placer"
	"github.com/better-compute/better-compute/workers/internal/placer/placertest"
)

// racks makes nodes of 8 H100s in racks of block b1 (rack name -> node count), labelled for the
// pool "racks", and returns each rack's nodes.
func racks(t *testing.T, env *servertest.Env, sizes map[string]int) map[string][]uuid.UUID {
	t.Helper()
	tenant := capacitytest.RootTenant(t, env.Pool)
	out := map[string][]uuid.UUID{}
	for rack, n := range sizes {
		out[rack] = capacitytest.Nodes(t, env.Pool, tenant, n, capacitytest.NodeSpec{
			GPUs: 8, Model: "H100", CPUs: 64, MemoryBytes: 256 << 30,
			Labels: map[string]string{"gpu": "h100", "block": "b1", "rack": rack},
		})
	}
	return out
}

func gang(poolID string, nodes, perNode int32, level string, required bool) *leasesv1.CreateRequest {
	mode := leasesv1.TopologyMode_TOPOLOGY_MODE_PREFERRED
	if required {
		mode = leasesv1.TopologyMode_TOPOLOGY_MODE_REQUIRED
	}
	return &leasesv1.CreateRequest{
		PoolId: poolID, Nodes: nodes, GpusPerNode: perNode, Duration: hour(),
		GangTopology: &leasesv1.GangTopology{Level: level, Mode: mode},
	}
}

// TestGangs runs gangs through the API on simulated racks: refused shapes, a gang placed all at
// once in the rack that fits it best with its members in rank order, one that can never fit
// failed, one that cannot fit now waiting without holding anything and placed once a gang ends,
// and a gang that ends when a member's GPU becomes unhealthy.
func TestGangs(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	byRack := racks(t, env, map[string]int{"r1": 2, "r2": 4, "r3": 3})
	rackOf := map[string]string{}
	for rack, ids := range byRack {
		for _, id := range ids {
			rackOf[id.String()] = rack
		}
	}

	// The pool's levels are checked.
	_, err := pools(env).Create(ctx, &poolsv1.CreateRequest{Name: "bad", TopologyLevels: []string{"rack", "rack"}})
	wantField(t, err, connect.CodeInvalidArgument, "topology_levels")
	_, err = pools(env).Create(ctx, &poolsv1.CreateRequest{Name: "bad", GangReservationWait: durationpb.New(25 * time.Hour)})
	wantField(t, err, connect.CodeInvalidArgument, "gang_reservation_wait")
	created, err := pools(env).Create(ctx, &poolsv1.CreateRequest{
		Name: "racks", NodeSelector: map[string]string{"gpu": "h100"}, TopologyLevels: []string{"block"},
	})
	if err != nil {
		t.Fatal(err)
	}
	poolID := created.GetPool().GetId()
	updated, err := pools(env).Update(ctx, &poolsv1.UpdateRequest{
		Id: poolID, TopologyLevels: []string{"block", "rack"}, GangReservationWait: durationpb.New(0),
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"topology_levels", "gang_reservation_wait"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if p := updated.GetPool(); !slices.Equal(p.GetTopologyLevels(), []string{"block", "rack"}) || p.GetGangReservationWait().AsDuration() != 0 {
		t.Fatalf("updated pool: levels %v, wait %v", p.GetTopologyLevels(), p.GetGangReservationWait())
	}

	c := leases(env)
	// Refused shapes change nothing.
	for _, tc := range []struct {
		req   *leasesv1.CreateRequest
		code  connect.Code
		field string
	}{
		{gang(poolID, 1, 8, "rack", false), connect.CodeInvalidArgument, "nodes"},
		{gang(poolID, 2, 0, "rack", false), connect.CodeInvalidArgument, "gpus_per_node"},
		{&leasesv1.CreateRequest{PoolId: poolID, Nodes: 2, GpusPerNode: 8, Gpus: 8, Duration: hour()}, connect.CodeInvalidArgument, "gpus"},
		{gang(poolID, 2, 8, "", true), connect.CodeInvalidArgument, "gang_topology.level"},
		{gang(poolID, 2, 8, "zone", false), connect.CodeFailedPrecondition, "gang_topology.level"},
		{gang(poolID, 2, 9, "rack", false), connect.CodeFailedPrecondition, "gpus_per_node"},
		{&leasesv1.CreateRequest{PoolId: poolID, GpusPerNode: 8, Gpus: 8, Duration: hour()}, connect.CodeInvalidArgument, "nodes"},
	} {
		_, err := c.Create(ctx, tc.req)
		wantField(t, err, tc.code, tc.field)
	}
	if n := count(t, env, `SELECT count(*) FROM pool_leases`); n != 0 {
		t.Fatalf("%d leases after refused creates", n)
	}

	create := func(req *leasesv1.CreateRequest) string {
		t.Helper()
		res, err := c.Create(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return res.GetLease().GetId()
	}
	// a: 3 whole nodes in one rack: r3 fits it exactly (best fit). b: 4 in r2. c: 2 in r1, ending
	// when a member's GPU is unhealthy. never: no rack has 5 nodes. d: waits for b.
	a := create(gang(poolID, 3, 8, "rack", true))
	b := create(gang(poolID, 4, 8, "rack", true))
	cReq := gang(poolID, 2, 8, "rack", true)
	cReq.OnUnhealthyMember = poolsv1.UnhealthyLeaseAction_UNHEALTHY_LEASE_ACTION_END
	cl := create(cReq)
	never := create(gang(poolID, 5, 8, "rack", true))
	d := create(gang(poolID, 2, 4, "rack", true))

	placertest.Run(t, env.Pool, placer.Options{})
	for id, rack := range map[string]string{a: "r3", b: "r2", cl: "r1"} {
		l := awaitState(t, env, id, leasesv1.LeaseState_LEASE_STATE_PLACED)
		if l.GetGangDomain() != "block=b1,rack="+rack || len(l.GetAllocations()) != int(l.GetNodes()*8) || len(l.GetMembers()) != int(l.GetNodes()) {
			t.Fatalf("gang %s: domain %q, %d allocations, %d members; want rack %s", id, l.GetGangDomain(), len(l.GetAllocations()), len(l.GetMembers()), rack)
		}
		var hosts []string
		for i, m := range l.GetMembers() {
			if m.GetRank() != int32(i) || rackOf[m.GetNodeId()] != rack || len(m.GetGpuIndexes()) != 8 || !m.GetHealthy() ||
				m.GetDomain()["rack"] != rack || m.GetDomain()["block"] != "b1" {
				t.Fatalf("gang %s member %d: %v", id, i, m)
			}
			hosts = append(hosts, m.GetHostname())
		}
		if !slices.IsSorted(hosts) {
			t.Fatalf("gang %s: members not in hostname order within the rack: %v", id, hosts)
		}
	}
	if l := awaitState(t, env, never, leasesv1.LeaseState_LEASE_STATE_FAILED); !strings.Contains(l.GetReason(), "rack") {
		t.Fatalf("a gang no rack can hold failed with %q", l.GetReason())
	}
	// d waits, holding nothing.
	if l := leaseOf(t, env, d); l.GetState() != leasesv1.LeaseState_LEASE_STATE_PENDING || len(l.GetAllocations()) != 0 {
		t.Fatalf("gang d: %v with %d allocations, want pending with none", l.GetState(), len(l.GetAllocations()))
	}

	// A hostfile of a.
	var hf strings.Builder
	if err := client.WriteHostfile(&hf, leaseOf(t, env, a), client.HostfileOpenMPI, true); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(hf.String()), "\n"); len(lines) != 3 || !strings.HasSuffix(lines[0], " slots=8") {
		t.Fatalf("hostfile:\n%s", hf.String())
	}

	// b ends: d takes two of its nodes, in r2.
	if _, err := c.Release(ctx, &leasesv1.ReleaseRequest{Id: b}); err != nil {
		t.Fatal(err)
	}
	if l := awaitState(t, env, d, leasesv1.LeaseState_LEASE_STATE_PLACED); l.GetGangDomain() != "block=b1,rack=r2" || len(l.GetMembers()) != 2 {
		t.Fatalf("gang d after b ended: domain %q, members %v", l.GetGangDomain(), l.GetMembers())
	}

	// A member of c loses a GPU: c asked to end.
	held := leaseOf(t, env, cl).GetAllocations()[3].GetGpuUuid()
	gpus := gpusv1connect.NewGpusServiceClient(env.HTTPClient(env.AdminKey), env.URL)
	if _, err := gpus.Quarantine(ctx, &gpusv1.QuarantineRequest{Uuid: held, Reason: "drill"}); err != nil {
		t.Fatal(err)
	}
	if l := awaitState(t, env, cl, leasesv1.LeaseState_LEASE_STATE_FAILED); !strings.HasPrefix(l.GetReason(), "gpu_unhealthy") {
		t.Fatalf("gang c ended with %q", l.GetReason())
	}
	// a member of a goes offline: a reports it.
	member := leaseOf(t, env, a).GetMembers()[1]
	if _, err := env.Pool.Exec(ctx, `UPDATE nodes SET online = false WHERE id = $1`, member.GetNodeId()); err != nil {
		t.Fatal(err)
	}
	if m := leaseOf(t, env, a).GetMembers()[1]; m.GetHealthy() || m.GetHealthReason() != "node offline" {
		t.Fatalf("member 1 of a offline: %v", m)
	}
}

// leaseOf reads a lease as the admin.
func leaseOf(t *testing.T, env *servertest.Env, id string) *leasesv1.Lease {
	t.Helper()
	res, err := leases(env).Get(ctx, &leasesv1.GetRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	return res.GetLease()
}

// awaitState polls the lease until it is in state, and returns it.
func awaitState(t *testing.T, env *servertest.Env, id string, state leasesv1.LeaseState) *leasesv1.Lease {
	t.Helper()
	var l *leasesv1.Lease
	capacitytest.Eventually(t, 10*time.Second, "lease "+id+" is "+state.String(), func() bool {
		l = leaseOf(t, env, id)
		return l.GetState() == state
	})
	return l
}

// TestGangReservation: a gang that cannot fit gets the rack where it fits soonest reserved
// (at once: the pool's wait is 0s), says when it expects to start, and from then on the rack
// takes only leases that end before that; the gang is placed when the lease in its way ends.
func TestGangReservation(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	racks(t, env, map[string]int{"r1": 2})
	created, err := pools(env).Create(ctx, &poolsv1.CreateRequest{
		Name: "racks", NodeSelector: map[string]string{"gpu": "h100"}, TopologyLevels: []string{"rack"},
		GangReservationWait: durationpb.New(0),
	})
	if err != nil {
		t.Fatal(err)
	}
	poolID := created.GetPool().GetId()
	c := leases(env)
	create := func(req *leasesv1.CreateRequest) string {
		t.Helper()
		res, err := c.Create(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return res.GetLease().GetId()
	}
	placertest.Run(t, env.Pool, placer.Options{})
	blocker := create(&leasesv1.CreateRequest{PoolId: poolID, Gpus: 8, Duration: hour()})
	end := awaitState(t, env, blocker, leasesv1.LeaseState_LEASE_STATE_PLACED).GetEndTime().AsTime()

	g := create(gang(poolID, 2, 8, "rack", true))
	capacitytest.Eventually(t, 10*time.Second, "the gang's reservation is noted", func() bool {
		return leaseOf(t, env, g).GetReservedStartTime() != nil
	})
	if got := leaseOf(t, env, g).GetReservedStartTime().AsTime(); !got.Equal(end) {
		t.Fatalf("the gang expects to start at %v, want the blocker's end %v", got, end)
	}
	// The long lease is older than the short one, so the round that places the short one has
	// looked at it: it waits, the only free GPUs being reserved for the gang from before its end.
	long := create(&leasesv1.CreateRequest{PoolId: poolID, Gpus: 4, Duration: durationpb.New(2 * time.Hour)})
	short := create(&leasesv1.CreateRequest{PoolId: poolID, Gpus: 4, Duration: durationpb.New(30 * time.Minute)})
	awaitState(t, env, short, leasesv1.LeaseState_LEASE_STATE_PLACED)
	if l := leaseOf(t, env, long); l.GetState() != leasesv1.LeaseState_LEASE_STATE_PENDING {
		t.Fatalf("a lease ending after the gang's reserved start was %v", l.GetState())
	}
	// The blocker and the short lease end: the gang is placed (before the long lease, older).
	for _, id := range []string{blocker, short} {
		if _, err := c.Release(ctx, &leasesv1.ReleaseRequest{Id: id}); err != nil {
			t.Fatal(err)
		}
	}
	if l := awaitState(t, env, g, leasesv1.LeaseState_LEASE_STATE_PLACED); l.GetReservedStartTime() != nil || len(l.GetMembers()) != 2 {
		t.Fatalf("gang placed with %d members, reserved start %v", len(l.GetMembers()), l.GetReservedStartTime())
	}
	if l := leaseOf(t, env, long); l.GetState() != leasesv1.LeaseState_LEASE_STATE_PENDING {
		t.Fatalf("the long lease is %v with the gang holding the rack", l.GetState())
	}
}
