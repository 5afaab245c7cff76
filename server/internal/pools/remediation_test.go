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

// TestPoolRemediationPolicy: a pool created without a policy has remediations on, one member at
// a time, in failure domains by "rack"; create and update set it, and bad values are refused
// naming the field.
func TestPoolRemediationPolicy(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env)
	dflt, err := c.Create(ctx, &poolsv1.CreateRequest{Name: "plain", NodeSelector: map[string]string{"a": "b"}})
	if err != nil {
		t.Fatal(err)
	}
	want := &poolsv1.RemediationPolicy{MaxNodes: 1, FailureDomainLabel: "rack"}
	if got := dflt.GetPool().GetRemediation(); !proto.Equal(got, want) {
		t.Fatalf("default policy %v, want %v", got, want)
	}

	set, err := c.Create(ctx, &poolsv1.CreateRequest{
		Name: "set", NodeSelector: map[string]string{"a": "b"},
		Remediation: &poolsv1.RemediationPolicy{Disabled: true, MaxNodes: 4, FailureDomainLabel: "topology.example.com/row"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want = &poolsv1.RemediationPolicy{Disabled: true, MaxNodes: 4, FailureDomainLabel: "topology.example.com/row"}
	if got := set.GetPool().GetRemediation(); !proto.Equal(got, want) {
		t.Fatalf("created policy %v, want %v", got, want)
	}
	var auto bool
	var maxNodes int32
	if err := env.Pool.QueryRow(ctx, `SELECT remediation_auto, remediation_max_nodes FROM pools WHERE id = $1`, set.GetPool().GetId()).Scan(&auto, &maxNodes); err != nil || auto || maxNodes != 4 {
		t.Fatalf("stored auto %v max %d (%v)", auto, maxNodes, err)
	}

	mask := &fieldmaskpb.FieldMask{Paths: []string{"remediation"}}
	up, err := c.Update(ctx, &poolsv1.UpdateRequest{Id: set.GetPool().GetId(), UpdateMask: mask, Remediation: &poolsv1.RemediationPolicy{MaxNodes: 10000}})
	if err != nil {
		t.Fatal(err)
	}
	want = &poolsv1.RemediationPolicy{MaxNodes: 10000}
	if got := up.GetPool().GetRemediation(); !proto.Equal(got, want) {
		t.Fatalf("updated policy %v, want %v", got, want)
	}
	got, err := c.Get(ctx, &poolsv1.GetRequest{Id: set.GetPool().GetId()})
	if err != nil || !proto.Equal(got.GetPool().GetRemediation(), want) {
		t.Fatalf("get: %v (%v)", got.GetPool().GetRemediation(), err)
	}
	// Another field's update leaves the policy as it is.
	up, err = c.Update(ctx, &poolsv1.UpdateRequest{Id: set.GetPool().GetId(), UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"description"}}, Description: "d"})
	if err != nil || !proto.Equal(up.GetPool().GetRemediation(), want) {
		t.Fatalf("policy after another update: %v (%v)", up.GetPool().GetRemediation(), err)
	}

	// Rules and ladders: stored, and read back as written.
	quick := &poolsv1.RemediationPolicy{
		MaxNodes: 2,
		Rules:    []*poolsv1.RemediationRule{{Check: "xid", Codes: []int64{79}, Ladder: "quick"}, {Check: "ecc_dbe", Ladder: "service"}},
		Ladders: []*poolsv1.RemediationLadder{{Name: "quick", Steps: []*poolsv1.RemediationStep{
			{Action: "drain"}, {Action: "reboot"}, {Action: "verify", Window: durationpb.New(time.Minute)}, {Action: "service"},
		}}},
	}
	up, err = c.Update(ctx, &poolsv1.UpdateRequest{Id: set.GetPool().GetId(), UpdateMask: mask, Remediation: quick})
	if err != nil {
		t.Fatal(err)
	}
	if got := up.GetPool().GetRemediation(); !proto.Equal(got, quick) {
		t.Fatalf("policy with rules and ladders %v, want %v", got, quick)
	}

	step := func(a string) *poolsv1.RemediationStep { return &poolsv1.RemediationStep{Action: a} }
	for _, bad := range []struct {
		p     *poolsv1.RemediationPolicy
		field string
	}{
		{&poolsv1.RemediationPolicy{Rules: []*poolsv1.RemediationRule{{Ladder: "nope"}}}, "remediation"},
		{&poolsv1.RemediationPolicy{Ladders: []*poolsv1.RemediationLadder{{Name: "bad name!", Steps: []*poolsv1.RemediationStep{step("drain"), step("service")}}}}, "remediation.ladders[0].name"},
		{&poolsv1.RemediationPolicy{Ladders: []*poolsv1.RemediationLadder{{Name: "x", Steps: []*poolsv1.RemediationStep{step("reboot"), step("service")}}}}, "remediation"},
		{&poolsv1.RemediationPolicy{MaxNodes: -1}, "remediation.max_nodes"},
		{&poolsv1.RemediationPolicy{MaxNodes: 10001}, "remediation.max_nodes"},
		{&poolsv1.RemediationPolicy{FailureDomainLabel: "not a label"}, "remediation.failure_domain_label"},
	} {
		_, err := c.Create(ctx, &poolsv1.CreateRequest{Name: "bad", NodeSelector: map[string]string{"a": "b"}, Remediation: bad.p})
		wantField(t, err, connect.CodeInvalidArgument, bad.field)
		_, err = c.Update(ctx, &poolsv1.UpdateRequest{Id: set.GetPool().GetId(), UpdateMask: mask, Remediation: bad.p})
		wantField(t, err, connect.CodeInvalidArgument, bad.field)
	}
}

// TestPoolIdlePolicy: a pool's idle policy is stored and read back; unset removes it; bad
// values are refused naming the field.
func TestPoolIdlePolicy(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env)
	p := &poolsv1.IdlePolicy{MinUtilization: 5, Window: durationpb.New(30 * time.Minute), Action: poolsv1.IdleAction_IDLE_ACTION_RELEASE, Grace: durationpb.New(10 * time.Minute)}
	created, err := c.Create(ctx, &poolsv1.CreateRequest{Name: "idle", NodeSelector: map[string]string{"a": "b"}, IdlePolicy: p})
	if err != nil {
		t.Fatal(err)
	}
	if got := created.GetPool().GetIdlePolicy(); !proto.Equal(got, p) {
		t.Fatalf("created idle policy %v, want %v", got, p)
	}
	mask := &fieldmaskpb.FieldMask{Paths: []string{"idle_policy"}}
	up, err := c.Update(ctx, &poolsv1.UpdateRequest{Id: created.GetPool().GetId(), UpdateMask: mask})
	if err != nil || up.GetPool().GetIdlePolicy() != nil {
		t.Fatalf("removed: %v (%v)", up.GetPool().GetIdlePolicy(), err)
	}
	for _, bad := range []struct {
		p     *poolsv1.IdlePolicy
		field string
	}{
		{&poolsv1.IdlePolicy{MinUtilization: 0, Window: durationpb.New(time.Hour), Action: poolsv1.IdleAction_IDLE_ACTION_NOTIFY}, "idle_policy.min_utilization"},
		{&poolsv1.IdlePolicy{MinUtilization: 5, Window: durationpb.New(time.Minute), Action: poolsv1.IdleAction_IDLE_ACTION_NOTIFY}, "idle_policy.window"},
		{&poolsv1.IdlePolicy{MinUtilization: 5, Window: durationpb.New(time.Hour)}, "idle_policy.action"},
		{&poolsv1.IdlePolicy{MinUtilization: 5, Window: durationpb.New(time.Hour), Action: poolsv1.IdleAction_IDLE_ACTION_RELEASE, Grace: durationpb.New(48 * time.Hour)}, "idle_policy.grace"},
	} {
		_, err := c.Update(ctx, &poolsv1.UpdateRequest{Id: created.GetPool().GetId(), UpdateMask: mask, IdlePolicy: bad.p})
		wantField(t, err, connect.CodeInvalidArgument, bad.field)
	}
}
