package provision

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
)

// TestRemediationHooks: a remediation power-cycles the machine behind a node through its
// provider (the step is recorded), and replaces it with a new machine of its class that becomes
// ready while the old one goes; a node no machine is behind is left to others (false).
func TestRemediationHooks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.startGateway(t)
	c := e.controller(t, nil)
	e.runWorkers(t, c.Registration())
	e.simClass(t, "small")
	id := e.createMachine(t, "small", "m1")
	e.awaitState(t, id, StateReady, 30*time.Second)
	node := *e.machine(t, id).NodeID

	if done, err := c.PowerCycleNode(t.Context(), uuid.New()); done || err != nil {
		t.Fatalf("power cycle of a node no machine is behind: %v, %v", done, err)
	}
	if done, err := c.PowerCycleNode(t.Context(), node); !done || err != nil {
		t.Fatalf("power cycle: %v, %v", done, err)
	}
	if s := e.steps(t, id); !slices.Contains(s, StateReady) {
		t.Fatalf("steps %v", s)
	}
	var detail string
	if err := e.Pool.QueryRow(t.Context(), `SELECT detail FROM provision_machine_steps WHERE machine_id = $1 ORDER BY seq DESC LIMIT 1`, id).Scan(&detail); err != nil || detail != "power cycled by a remediation" {
		t.Fatalf("the machine's last step: %q (%v)", detail, err)
	}

	if done, err := c.ReplaceNode(t.Context(), uuid.New()); done || err != nil {
		t.Fatalf("replace of a node no machine is behind: %v, %v", done, err)
	}
	if done, err := c.ReplaceNode(t.Context(), node); !done || err != nil {
		t.Fatalf("replace: %v, %v", done, err)
	}
	e.awaitState(t, id, StateGone, 30*time.Second)
	rows, err := provisiondb.New(e.Pool).ListMachines(t.Context(), provisiondb.ListMachinesParams{TenantID: e.machine(t, id).TenantID, After: uuid.Nil, Lim: 10})
	if err != nil {
		t.Fatal(err)
	}
	var next *provisiondb.ProvisionMachine
	for i := range rows {
		if rows[i].ID != id {
			next = &rows[i]
		}
	}
	if next == nil || next.Class != "small" || len(next.Name) <= len("m1") || next.Name[:3] != "m1-" {
		t.Fatalf("the replacement: %+v", next)
	}
	e.awaitState(t, next.ID, StateReady, 30*time.Second)
}
