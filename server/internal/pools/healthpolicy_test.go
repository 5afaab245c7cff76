package pools_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestPoolGPUHealthPolicyBadInput(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env)
	rule := func(check, effect string) *poolsv1.GpuHealthRule {
		return &poolsv1.GpuHealthRule{Check: check, Effect: effect}
	}
	ok := rule("xid", "ignore")
	many := make([]*poolsv1.GpuHealthRule, 65)
	for i := range many {
		many[i] = ok
	}
	for _, tc := range []struct {
		policy *poolsv1.GpuHealthPolicy
		field  string
	}{
		{&poolsv1.GpuHealthPolicy{Rules: []*poolsv1.GpuHealthRule{ok, ok, rule("xid", "explode")}}, "gpu_health_policy.rules[2].effect"},
		{&poolsv1.GpuHealthPolicy{Rules: []*poolsv1.GpuHealthRule{rule("manual", "ignore")}}, "gpu_health_policy.rules[0].check"},
		{&poolsv1.GpuHealthPolicy{Rules: []*poolsv1.GpuHealthRule{{Check: "xid", Effect: "degrade", Codes: make([]int64, 65)}}}, "gpu_health_policy.rules[0].codes"},
		{&poolsv1.GpuHealthPolicy{Rules: []*poolsv1.GpuHealthRule{{Check: "xid", Effect: "degrade", MinCount: -1}}}, "gpu_health_policy.rules[0].min_count"},
		{&poolsv1.GpuHealthPolicy{Rules: []*poolsv1.GpuHealthRule{{Check: "xid", Effect: "degrade", Window: durationpb.New(25 * time.Hour)}}}, "gpu_health_policy.rules[0].window"},
		{&poolsv1.GpuHealthPolicy{Rules: []*poolsv1.GpuHealthRule{{Check: "xid", Effect: "degrade", Window: durationpb.New(-time.Second)}}}, "gpu_health_policy.rules[0].window"},
		{&poolsv1.GpuHealthPolicy{Rules: many}, "gpu_health_policy.rules"},
		{&poolsv1.GpuHealthPolicy{OnUnhealthyLease: 9}, "gpu_health_policy.on_unhealthy_lease"},
	} {
		_, err := c.Create(ctx, &poolsv1.CreateRequest{Name: "bad", GpuHealthPolicy: tc.policy})
		wantField(t, err, connect.CodeInvalidArgument, tc.field)
	}
	created, err := c.Create(ctx, &poolsv1.CreateRequest{Name: "fine"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Update(ctx, &poolsv1.UpdateRequest{
		Id: created.GetPool().GetId(), UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"gpu_health_policy"}},
		GpuHealthPolicy: &poolsv1.GpuHealthPolicy{Rules: []*poolsv1.GpuHealthRule{ok, rule("nope", "ignore")}},
	})
	wantField(t, err, connect.CodeInvalidArgument, "gpu_health_policy.rules[1].check")
}

func TestPoolGPUHealthPolicyRoundTrip(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env)
	policy := &poolsv1.GpuHealthPolicy{
		Rules: []*poolsv1.GpuHealthRule{
			{Check: "xid", Codes: []int64{79}, Effect: "ignore"},
			{Check: "xid", Codes: []int64{94, 63}, MinCount: 3, Effect: "quarantine_gpu", Window: durationpb.New(90 * time.Minute)},
			{Check: "thermal_slowdown", Effect: "drain_node"},
		},
		OnUnhealthyLease: poolsv1.UnhealthyLeaseAction_UNHEALTHY_LEASE_ACTION_END,
	}
	created, err := c.Create(ctx, &poolsv1.CreateRequest{Name: "strict", GpuHealthPolicy: policy})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetPool().GetId()
	if got := created.GetPool().GetGpuHealthPolicy(); !proto.Equal(got, policy) {
		t.Fatalf("created with %v, got %v", policy, got)
	}
	got, err := c.Get(ctx, &poolsv1.GetRequest{Id: id})
	if err != nil || !proto.Equal(got.GetPool().GetGpuHealthPolicy(), policy) {
		t.Fatalf("get: %v, %v", got.GetPool().GetGpuHealthPolicy(), err)
	}
	var stored string
	if err := env.Pool.QueryRow(ctx, `SELECT gpu_health_policy->>'onUnhealthyLease' FROM pools WHERE id = $1`, id).Scan(&stored); err != nil || stored != "end" {
		t.Fatalf("stored action %q, %v", stored, err)
	}

	// Another field's update keeps it; an update that names it replaces it; unset removes it.
	mask := func(paths ...string) *fieldmaskpb.FieldMask { return &fieldmaskpb.FieldMask{Paths: paths} }
	up, err := c.Update(ctx, &poolsv1.UpdateRequest{Id: id, UpdateMask: mask("description"), Description: "strict GPUs"})
	if err != nil || !proto.Equal(up.GetPool().GetGpuHealthPolicy(), policy) {
		t.Fatalf("after a description update: %v, %v", up.GetPool().GetGpuHealthPolicy(), err)
	}
	keep := &poolsv1.GpuHealthPolicy{OnUnhealthyLease: poolsv1.UnhealthyLeaseAction_UNHEALTHY_LEASE_ACTION_KEEP}
	up, err = c.Update(ctx, &poolsv1.UpdateRequest{Id: id, UpdateMask: mask("gpu_health_policy"), GpuHealthPolicy: keep})
	if err != nil || !proto.Equal(up.GetPool().GetGpuHealthPolicy(), keep) {
		t.Fatalf("after replacing it: %v, %v", up.GetPool().GetGpuHealthPolicy(), err)
	}
	up, err = c.Update(ctx, &poolsv1.UpdateRequest{Id: id, UpdateMask: mask("gpu_health_policy")})
	if err != nil || up.GetPool().GetGpuHealthPolicy() != nil {
		t.Fatalf("after removing it: %v, %v", up.GetPool().GetGpuHealthPolicy(), err)
	}
	if err := env.Pool.QueryRow(ctx, `SELECT gpu_health_policy::text FROM pools WHERE id = $1`, id).Scan(&stored); err != nil || stored != "{}" {
		t.Fatalf("stored after removing it: %s, %v", stored, err)
	}
	// A pool created without one has none.
	plain, err := c.Create(ctx, &poolsv1.CreateRequest{Name: "plain"})
	if err != nil || plain.GetPool().GetGpuHealthPolicy() != nil {
		t.Fatalf("a pool without a policy: %v, %v", plain.GetPool().GetGpuHealthPolicy(), err)
	}
}
