package leases_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/better-compute/better-compute/gen/db"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/server/servertest"
)

// TestIdleOptOut: idle_opt_out is refused, naming the field, where the pool's idle policy does
// not allow it, and kept on the lease where it does; LEND and the policy's new fields read back.
func TestIdleOptOut(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	strict := fleet(t, env, 1, 2)
	policy := &poolsv1.IdlePolicy{
		MinUtilization: 5, Window: durationpb.New(30 * time.Minute), Action: poolsv1.IdleAction_IDLE_ACTION_LEND,
		Grace: durationpb.New(time.Minute), AllowOptOut: true, TunnelCountsAsUse: true,
	}
	if _, err := pools(env).Update(ctx, &poolsv1.UpdateRequest{Id: strict, IdlePolicy: &poolsv1.IdlePolicy{
		MinUtilization: 5, Window: durationpb.New(30 * time.Minute), Action: poolsv1.IdleAction_IDLE_ACTION_LEND,
	}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"idle_policy"}}}); err != nil {
		t.Fatal(err)
	}
	lenient, err := pools(env).Create(ctx, &poolsv1.CreateRequest{Name: "lenient", NodeSelector: map[string]string{"gpu": "h100"}, IdlePolicy: policy})
	if err != nil {
		t.Fatal(err)
	}
	if got := lenient.GetPool().GetIdlePolicy(); !proto.Equal(got, policy) {
		t.Fatalf("policy %v, want %v", got, policy)
	}
	_, err = leases(env).Create(ctx, &leasesv1.CreateRequest{PoolId: strict, Gpus: 1, Duration: hour(), IdleOptOut: true})
	wantField(t, err, connect.CodeInvalidArgument, "idle_opt_out")
	if n := count(t, env, `SELECT count(*) FROM pool_leases`); n != 0 {
		t.Fatalf("%d leases after a refused create", n)
	}
	res, err := leases(env).Create(ctx, &leasesv1.CreateRequest{PoolId: lenient.GetPool().GetId(), Gpus: 1, Duration: hour(), IdleOptOut: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := leases(env).Get(ctx, &leasesv1.GetRequest{Id: res.GetLease().GetId()})
	if err != nil || !got.GetLease().GetIdleOptOut() {
		t.Fatalf("get: %v, %v; want idle_opt_out", got, err)
	}
}

// TestWake: a lent lease shows what it lent; leases/wake marks it waking (lent.wake_time) and
// queues the pool's placer; a lease not lent is returned as it is; another id is not found.
func TestWake(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	pid := fleet(t, env, 2, 2)
	tenant := capacitytest.RootTenant(t, env.Pool)
	ids := capacitytest.Leases(t, env.Pool, tenant, uuid.MustParse(pid), 2, capacitytest.LeaseSpec{GPUs: 2, Model: "H100"})
	nodes := []uuid.UUID{}
	rows, err := env.Pool.Query(ctx, `SELECT id FROM nodes ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, id)
	}
	lent, plain := ids[0], ids[1]
	capacitytest.PlaceOn(t, env.Pool, lent, nodes[0])
	capacitytest.PlaceOn(t, env.Pool, plain, nodes[1])
	if devs, err := db.New(env.Pool).LendLease(ctx, db.LendLeaseParams{LeaseID: lent, Now: time.Now()}); err != nil || len(devs) != 2 {
		t.Fatalf("lend: %v, %v", devs, err)
	}
	got, err := leases(env).Get(ctx, &leasesv1.GetRequest{Id: lent.String()})
	if err != nil {
		t.Fatal(err)
	}
	if l := got.GetLease().GetLent(); l.GetGpus() != 2 || l.GetBorrowers() != 0 || l.GetSince() == nil || l.GetWakeTime() != nil {
		t.Fatalf("lent %v", l)
	}
	woke, err := leases(env).Wake(ctx, &leasesv1.WakeRequest{Id: lent.String()})
	if err != nil {
		t.Fatal(err)
	}
	if l := woke.GetLease().GetLent(); l.GetWakeTime() == nil {
		t.Fatalf("after wake: lent %v, want a wake time", l)
	}
	capacitytest.Eventually(t, 10*time.Second, "the placer queued", func() bool {
		return count(t, env, `SELECT count(*) FROM reconcile_queue WHERE key = $1`, pid) > 0
	})
	notLent, err := leases(env).Wake(ctx, &leasesv1.WakeRequest{Id: plain.String()})
	if err != nil || notLent.GetLease().GetLent() != nil {
		t.Fatalf("wake a lease not lent: %v, %v", notLent, err)
	}
	if n := count(t, env, `SELECT count(*) FROM pool_leases WHERE wake_requested_at IS NOT NULL`); n != 1 {
		t.Fatalf("%d leases waking, want 1", n)
	}
	_, err = leases(env).Wake(ctx, &leasesv1.WakeRequest{Id: uuid.NewString()})
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("wake an unknown lease: %v", err)
	}
}
