package nodecontrol_test

import (
	"encoding/json"
	"testing"
	"time"

	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/workers/internal/nodecontrol"
)

// TestDrainedEventWithHostileHostname: a node whose stored hostname holds control characters,
// quotes and backslashes (joined before hostnames were checked) still reaches drained, with a
// node.drained event that is valid JSON and carries the hostname exactly.
func TestDrainedEventWithHostileHostname(t *testing.T) {
	t.Parallel()
	f := newFleet(t)
	runWorkers(t, f.Pool, nodecontrol.Options{})
	hostname := "a\x01\x1b[2J\u2028\"\\b"
	id := newNode(t, f.Pool, f.tenant, hostname, "")
	if _, err := f.nodes.Cordon(ctx, &nodesv1.CordonRequest{Id: id.String()}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.nodes.Drain(ctx, &nodesv1.DrainRequest{Id: id.String()}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 20*time.Second, "the node is drained", func() bool { return node(t, f.Pool, id).State == "drained" })
	var payload string
	if err := f.Pool.QueryRow(ctx, "SELECT payload::text FROM outbox WHERE type = 'node.drained' AND subject = $1", "node/"+id.String()).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	var ev struct{ ID, Hostname, From, To string }
	if err := json.Unmarshal([]byte(payload), &ev); err != nil || ev.ID != id.String() || ev.Hostname != hostname || ev.From != "draining" || ev.To != "drained" {
		t.Errorf("node.drained %s (%v)", payload, err)
	}
	var created string
	if err := f.Pool.QueryRow(ctx, "SELECT payload::text FROM outbox WHERE type = 'command.created' AND payload->>'nodeId' = $1", id.String()).Scan(&created); err != nil {
		t.Fatalf("command.created for the drain: %v", err)
	}
	var cev struct{ Type string }
	if err := json.Unmarshal([]byte(created), &cev); err != nil || cev.Type != nodecontrol.CommandDrain {
		t.Errorf("command.created %s (%v)", created, err)
	}
}
