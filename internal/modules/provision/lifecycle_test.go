package provision

import (
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	provisionmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/provision"
	"github.com/better-compute/better-compute/internal/provision/simprovider"
)

// TestLifecycleEndToEnd: with the controller in the workers runtime, a real gateway and sim
// machines that are FakeDaemons, a machine goes requested → … → ready as its node joins with the
// machine's token and says hello, and deleting it drains and retires the node and destroys the
// machine at the provider.
func TestLifecycleEndToEnd(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.startGateway(t)
	e.runWorkers(t, e.controller(t, nil).Registration())
	e.simClass(t, "small")
	id := e.createMachine(t, "small", "m1")

	e.awaitState(t, id, StateReady, 30*time.Second)
	got, err := e.client.GetMachine(t.Context(), &provisionmodulev1.GetMachineRequest{Id: id.String()})
	if err != nil {
		t.Fatal(err)
	}
	m := got.GetMachine()
	if m.GetState() != provisionmodulev1.MachineState_MACHINE_STATE_READY || m.GetNodeId() == "" || m.GetProviderId() == "" {
		t.Fatalf("machine %v: want ready with a node and a provider id", m)
	}
	want := []provisionmodulev1.MachineState{
		provisionmodulev1.MachineState_MACHINE_STATE_REQUESTED, provisionmodulev1.MachineState_MACHINE_STATE_PROVISIONING,
		provisionmodulev1.MachineState_MACHINE_STATE_BOOTING, provisionmodulev1.MachineState_MACHINE_STATE_JOINED,
		provisionmodulev1.MachineState_MACHINE_STATE_READY,
	}
	var have []provisionmodulev1.MachineState
	for _, s := range m.GetSteps() {
		have = append(have, s.GetState())
	}
	if !slices.Equal(have, want) {
		t.Fatalf("steps %v, want %v", have, want)
	}
	node, err := db.New(e.Pool).GetNodeForGateway(t.Context(), uuid.MustParse(m.GetNodeId()))
	if err != nil {
		t.Fatal(err)
	}
	if node.Hostname != "m1" || node.State != fleet.StateReady {
		t.Fatalf("node %s is %s, hostname %q: want ready, m1", node.ID, node.State, node.Hostname)
	}
	tok, err := db.New(e.Pool).GetJoinToken(t.Context(), *node.JoinTokenID)
	if err != nil {
		t.Fatal(err)
	}
	if tok.MaxUses != 1 || tok.Uses != 1 || tok.TenantID != node.TenantID {
		t.Fatalf("join token %+v: want single use, used once, the machine's tenant", tok)
	}

	if _, err := e.client.DeleteMachine(t.Context(), &provisionmodulev1.DeleteMachineRequest{Id: id.String()}); err != nil {
		t.Fatal(err)
	}
	e.awaitState(t, id, StateGone, 30*time.Second)
	node, err = db.New(e.Pool).GetNodeForGateway(t.Context(), node.ID)
	if err != nil {
		t.Fatal(err)
	}
	if node.State != fleet.StateRetired || node.RevokedAt == nil {
		t.Fatalf("node after delete: %s, revoked %v; want retired and revoked", node.State, node.RevokedAt)
	}
	if all := e.cloud.All(); len(all) != 1 || all[0].State != provision.ProviderGone {
		t.Fatalf("provider holds %+v, want one machine, gone", all)
	}
	if s := e.steps(t, id); !slices.Equal(s[len(s)-4:], []string{StateDeleting, StateDraining, StateDestroying, StateGone}) {
		t.Fatalf("steps %v", s)
	}
}

// TestCrashSafety kills the controller (in effect: its Reconcile fails and a new controller
// takes over) just before and just after each provider action; each machine still ends ready
// once and then gone once, and the provider made one machine per machine and holds none.
func TestCrashSafety(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil)
	e.startGateway(t)
	e.runWorkers(t) // the node controllers, which drain nodes
	e.simClass(t, "small")
	e.mod.cfg.MaxMachinesPerTenant = 100

	type point struct {
		at    string
		after bool
		// deleteEarly asks for the deletion right after the crash, before another controller
		// runs: the provider's id may not be recorded yet.
		deleteEarly bool
		// then, when set, is where the next controller crashes (before acting), once.
		then string
	}
	points := []point{
		{at: "create"}, {at: "create", after: true}, {at: "create", after: true, deleteEarly: true},
		{at: "create", after: true, deleteEarly: true, then: "delete"},
		{at: "delete"}, {at: "delete", after: true},
	}
	for i, p := range points {
		name := "m" + string(rune('a'+i))
		id := e.createMachine(t, "small", name)
		ctrl := e.crashingController(t, p.at, p.after)
		crashed := false
		drive := func(state string) {
			t.Helper()
			poll.Until(t, 30*time.Second, name+" "+state, func() bool {
				err := ctrl.Reconcile(t.Context(), id.String())
				switch {
				case errors.Is(err, errCrash):
					crashed = true
					ctrl = e.controller(t, nil) // a new process
					if p.then != "" {
						ctrl, p.then = e.crashingController(t, p.then, false), ""
					}
					if p.deleteEarly {
						if _, err := e.client.DeleteMachine(t.Context(), &provisionmodulev1.DeleteMachineRequest{Id: id.String()}); err != nil {
							t.Fatal(err)
						}
					}
				case err != nil:
					t.Logf("%s: %v", name, err)
				}
				return e.machine(t, id).State == state
			}, poll.Every(20*time.Millisecond))
		}
		if !p.deleteEarly {
			drive(StateReady)
			if _, err := e.client.DeleteMachine(t.Context(), &provisionmodulev1.DeleteMachineRequest{Id: id.String()}); err != nil {
				t.Fatal(err)
			}
		}
		drive(StateGone)
		if !crashed {
			t.Fatalf("%+v: the controller never crashed", p)
		}
		s := e.steps(t, id)
		if p.deleteEarly && p.at == "create" {
			if slices.Contains(s, StateReady) || count(s, StateGone) != 1 {
				t.Fatalf("%+v: steps %v, want gone once and never ready", p, s)
			}
		} else if count(s, StateReady) != 1 || count(s, StateGone) != 1 {
			t.Fatalf("%+v: steps %v, want ready once and gone once", p, s)
		}
	}
	if n := e.cloud.Creates(); n != len(points) {
		t.Fatalf("the provider made %d machines for %d machines", n, len(points))
	}
	seen := map[string]bool{}
	for _, m := range e.cloud.All() {
		if m.State != provision.ProviderGone {
			t.Fatalf("orphan at the provider: %+v", m)
		}
		if seen[m.Tags[provision.TagMachine]] {
			t.Fatalf("two provider machines for machine %s", m.Tags[provision.TagMachine])
		}
		seen[m.Tags[provision.TagMachine]] = true
	}
}

// crashingController is a controller whose sim provider crashes once at the call at.
func (e *env) crashingController(t *testing.T, at string, after bool) *Controller {
	t.Helper()
	once := new(sync.Once)
	return e.controller(t, Providers{simprovider.Kind: func(params json.RawMessage, creds []byte, _ provision.Egress) (provision.Provider, error) {
		p, err := e.cloud.Factory(params, creds, provision.Egress{})
		if err != nil {
			return nil, err
		}
		return crashing{Provider: p, at: at, after: after, once: once}, nil
	}})
}

func count(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}
