package nodecontrol_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/better-compute/better-compute/gen/db"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/workers/internal/nodecontrol"
)

func TestSpecBecomesCommandsAndIsObserved(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	runWorkers(t, f.Pool, nodecontrol.Options{CommandPoll: 50 * time.Millisecond, RetryFailedAfter: 3 * time.Second})
	id := newNode(t, f.Pool, f.tenant, "a", "1.0.0")

	config, _ := structpb.NewStruct(map[string]any{"x": 1})
	spec := &nodesv1.NodeSpec{
		Labels:        &nodesv1.LabelSet{Values: map[string]string{"tier": "gold"}},
		Taints:        []*nodesv1.Taint{{Key: "dedicated", Value: "ml", Effect: "NoSchedule"}},
		DaemonVersion: "2.0.0",
		Config:        config,
	}
	res, err := f.nodes.UpdateSpec(ctx, &nodesv1.UpdateSpecRequest{Id: id.String(), Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	gen := res.GetNode().GetSpecGeneration()

	// Labels and taints are applied at once; the config becomes a command, the version an
	// upgrade workflow made for node specs.
	poll.Until(t, 20*time.Second, "the spec reconciler sends the config and puts the node in an upgrade workflow", func() bool {
		return len(commands(t, f.Pool, id, nodecontrol.CommandConfigure)) == 1 && specWorkflow(t, f, id) != ""
	})
	configure := commands(t, f.Pool, id, nodecontrol.CommandConfigure)[0]
	if got := specWorkflow(t, f, id); got != "2.0.0" {
		t.Errorf("the node is in a spec workflow to %q, want 2.0.0", got)
	}
	if configure.Key != fmt.Sprintf("configure-%d", gen) || !sameJSON(configure.Payload, `{"config": {"x": 1}}`) {
		t.Errorf("configure command %+v", configure)
	}
	n := node(t, f.Pool, id)
	if !sameJSON(string(n.Labels), `{"tier": "gold"}`) || !sameJSON(string(n.Taints), `[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]`) {
		t.Errorf("labels %s, taints %s", n.Labels, n.Taints)
	}
	c := condition(t, n, fleet.ConditionSpecApplied)
	if c.Status != fleet.StatusUnknown || n.ObservedGeneration >= gen {
		t.Errorf("while commands run: SpecApplied %+v, observed %d of %d", c, n.ObservedGeneration, gen)
	}

	// The config is applied when its command succeeds; the upgrade is done when the daemon
	// reports the new version.
	finish(t, f.Pool, configure.ID, "succeeded", "")
	poll.Until(t, 10*time.Second, "the config is recorded as applied", func() bool {
		return sameJSON(string(node(t, f.Pool, id).AppliedConfig), `{"x": 1}`)
	})
	poll.Until(t, 10*time.Second, "the upgrade is in progress in its workflow", func() bool {
		return condition(t, node(t, f.Pool, id), fleet.ConditionSpecApplied).Reason == "Upgrading"
	})
	if n := node(t, f.Pool, id); n.ObservedGeneration >= gen {
		t.Errorf("observed generation %d before the daemon reports its version", n.ObservedGeneration)
	}
	hello(t, f.Pool, id, "2.0.0", &daemonv1.Inventory{Hostname: "a", Cpus: 4})
	poll.Until(t, 10*time.Second, "observed_generation catches up", func() bool {
		n := node(t, f.Pool, id)
		c := condition(t, n, fleet.ConditionSpecApplied)
		return n.ObservedGeneration == gen && c.Status == fleet.StatusTrue && c.Reason == "Applied" && c.ObservedGeneration == gen
	})
	if got := specEvents(t, f, "node.spec.applied", gen); got != 1 {
		t.Errorf("%d node.spec.applied events for generation %d, want 1", got, gen)
	}
	got, err := f.nodes.Get(ctx, &nodesv1.GetRequest{Id: id.String()})
	if err != nil {
		t.Fatal(err)
	}
	g := got.GetNode()
	i := slices.IndexFunc(g.GetConditions(), func(c *nodesv1.Condition) bool { return c.GetType() == "SpecApplied" })
	if g.GetObservedGeneration() != gen || i < 0 || g.GetConditions()[i].GetStatus() != "True" ||
		g.GetConditions()[i].GetLastTransitionTime() == nil || g.GetConditions()[i].GetObservedGeneration() != gen ||
		len(g.GetTaints()) != 1 || g.GetSpec().GetDaemonVersion() != "2.0.0" {
		t.Errorf("nodes/get: %v", g)
	}

	// A config that fails is reported, and sent again after RetryFailedAfter.
	spec.Config, _ = structpb.NewStruct(map[string]any{"x": 2})
	res, err = f.nodes.UpdateSpec(ctx, &nodesv1.UpdateSpecRequest{Id: id.String(), Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	gen = res.GetNode().GetSpecGeneration()
	poll.Until(t, 10*time.Second, "the new config is sent", func() bool { return len(commands(t, f.Pool, id, nodecontrol.CommandConfigure)) == 2 })
	bad := commands(t, f.Pool, id, nodecontrol.CommandConfigure)[1]
	finish(t, f.Pool, bad.ID, "failed", "bad config")
	poll.Until(t, 10*time.Second, "SpecApplied turns False", func() bool {
		n := node(t, f.Pool, id)
		c := condition(t, n, fleet.ConditionSpecApplied)
		return c.Status == fleet.StatusFalse && c.Reason == "ConfigureFailed" && strings.Contains(c.Message, "bad config") && n.ObservedGeneration == gen
	})
	if got := specEvents(t, f, "node.spec.failed", gen); got != 1 {
		t.Errorf("%d node.spec.failed events for generation %d, want 1", got, gen)
	}
	poll.Until(t, 10*time.Second, "the config is sent again", func() bool { return len(commands(t, f.Pool, id, nodecontrol.CommandConfigure)) == 3 })
	retry := commands(t, f.Pool, id, nodecontrol.CommandConfigure)[2]
	if retry.Key != fmt.Sprintf("configure-%d-retry-%s", gen, bad.ID) {
		t.Errorf("retry key %q", retry.Key)
	}
	finish(t, f.Pool, retry.ID, "succeeded", "")
	poll.Until(t, 10*time.Second, "applied after the retry", func() bool {
		n := node(t, f.Pool, id)
		return condition(t, n, fleet.ConditionSpecApplied).Status == fleet.StatusTrue && sameJSON(string(n.AppliedConfig), `{"x": 2}`)
	})
	if got := specEvents(t, f, "node.spec.applied", gen); got != 1 {
		t.Errorf("%d node.spec.applied events for generation %d, want 1", got, gen)
	}
	if got := len(commands(t, f.Pool, id, nodecontrol.CommandUpgrade)); got != 0 {
		t.Errorf("%d upgrade commands from the spec reconciler, want none (the workflow sends it)", got)
	}

	// The resync lists nodes that differ from their spec: not this one, until its labels are
	// changed behind the spec's back.
	if keys, err := db.New(f.Pool).SpecDriftNodeKeys(ctx); err != nil || slices.Contains(keys, id.String()) {
		t.Errorf("resync keys %v (%v) list a node that caught up", keys, err)
	}
	if _, err := f.Pool.Exec(ctx, `UPDATE nodes SET labels = '{"tier": "silver"}' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if keys, err := db.New(f.Pool).SpecDriftNodeKeys(ctx); err != nil || !slices.Contains(keys, id.String()) {
		t.Errorf("resync keys %v (%v) miss a node whose labels drifted", keys, err)
	}
}

func TestSpecOfRevokedNode(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	runWorkers(t, f.Pool, nodecontrol.Options{})
	id := newNode(t, f.Pool, f.tenant, "a", "1.0.0")
	if _, err := f.nodes.Revoke(ctx, &nodesv1.RevokeRequest{Id: id.String()}); err != nil {
		t.Fatal(err)
	}
	res, err := f.nodes.UpdateSpec(ctx, &nodesv1.UpdateSpecRequest{Id: id.String(), Spec: &nodesv1.NodeSpec{
		Labels: &nodesv1.LabelSet{Values: map[string]string{"a": "b"}}, DaemonVersion: "2.0.0",
	}})
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 20*time.Second, "SpecApplied says the node is unreachable", func() bool {
		n := node(t, f.Pool, id)
		c := condition(t, n, fleet.ConditionSpecApplied)
		return c.Status == fleet.StatusFalse && c.Reason == "NodeUnreachable" && n.ObservedGeneration == res.GetNode().GetSpecGeneration()
	})
	n := node(t, f.Pool, id)
	if labels, _ := decodeMap(n.Labels); !maps.Equal(labels, map[string]string{"a": "b"}) {
		t.Errorf("labels %s not applied", n.Labels)
	}
	if got := specWorkflow(t, f, id); got != "" {
		t.Errorf("a revoked node was put in an upgrade workflow to %s", got)
	}
	// The lifecycle reconciler, queued by the revoke, records why the node is unschedulable.
	poll.Until(t, 20*time.Second, "Schedulable says the node is revoked", func() bool {
		return condition(t, node(t, f.Pool, id), fleet.ConditionSchedulable).Reason == "Revoked"
	})
}

// specWorkflow is the version of the spec-made upgrade workflow the node is in, or "".
func specWorkflow(t *testing.T, f *env, id uuid.UUID) string {
	t.Helper()
	var v string
	err := f.Pool.QueryRow(ctx, `SELECT w.version FROM workflow_nodes wn JOIN workflows w ON w.id = wn.workflow_id
		WHERE wn.node_id = $1 AND wn.open AND w.origin = 'spec'`, id).Scan(&v)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatal(err)
	}
	return v
}

func specEvents(t *testing.T, f *env, typ string, gen int64) int {
	t.Helper()
	return count(t, f.Pool, `SELECT count(*) FROM outbox WHERE type = $1 AND (payload->>'generation')::bigint = $2`, typ, gen)
}

func sameJSON(a, b string) bool {
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return false
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return string(ja) == string(jb)
}

func decodeMap(b []byte) (map[string]string, error) {
	var m map[string]string
	err := json.Unmarshal(b, &m)
	return m, err
}
