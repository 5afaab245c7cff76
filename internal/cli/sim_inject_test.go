package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/gateway/gatewaytest"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/modules/standard"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/sim"
)

// runSimInject runs `better-compute sim inject args...` in this process.
func runSimInject(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCommand(standard.Modules())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(append([]string{"sim", "inject"}, args...))
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}

// TestSimInjectThroughTheControlSocket: a simulated 8-GPU machine, connected to a real gateway,
// reports the Xid that `sim inject` asked for through the simulator's control socket, counts it
// again, refuses a GPU it does not have, and clears its signals.
func TestSimInjectThroughTheControlSocket(t *testing.T) {
	t.Parallel()
	// A seed whose first machine has eight GPUs.
	var seed uint64
	for seed = 1; len(sim.Inventory(seed, 0, "sim").GetGpus()) != 8; seed++ {
	}
	e := gatewaytest.New(t)
	gw := e.StartGateway("gw1", nil)
	fleet, err := sim.New(sim.Options{Gateway: gw.Addr, RootPEM: e.Bundle.RootPEM(), Token: e.Token(1, time.Now().Add(time.Hour)), N: 1, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { defer close(ran); _ = fleet.Run(ctx) }()
	control := filepath.Join(t.TempDir(), "sim.sock")
	controlDone, err := sim.StartControl(ctx, control, fleet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-ran; <-controlDone })
	poll.Until(t, 60*time.Second, "the simulated machine connects", func() bool { return fleet.Machine(0).Connected })
	gpu3 := fleet.Machine(0).Inventory.GetGpus()[3]

	out, err := runSimInject(t, "--control", control, "--node", "sim-0001", "--gpu", "3", "--xid", "79")
	if err != nil {
		t.Fatalf("inject: %v\n%s", err, out)
	}
	if !strings.Contains(out, "sim-0001: 1 GPU signals") || !strings.Contains(out, gpu3.GetUuid()+" ") || !strings.Contains(out, "xid code 79 count 1: NVRM: Xid (PCI:0000:") {
		t.Errorf("inject printed:\n%s", out)
	}
	if out, err = runSimInject(t, "--control", control, "--node", "sim-0001", "--gpu", "3", "--xid", "79", "--count", "2"); err != nil || !strings.Contains(out, "count 3") {
		t.Errorf("inject again: %v\n%s", err, out)
	}
	h, err := fleet.GPUHealth("sim-0001")
	if err != nil {
		t.Fatal(err)
	}
	if s := h.GetSignals(); len(s) != 1 || s[0].GetGpuUuid() != gpu3.GetUuid() || s[0].GetCheck() != gpuhealth.CheckXid || s[0].GetCode() != 79 || s[0].GetCount() != 3 {
		t.Errorf("the machine reports %v", h)
	}
	if out, err = runSimInject(t, "--control", control, "--node", "sim-0001", "--gpu", "0", "--check", gpuhealth.CheckRowRemapPending); err != nil || !strings.Contains(out, "2 GPU signals") {
		t.Errorf("row remap pending: %v\n%s", err, out)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--node", "sim-0001", "--gpu", "8", "--xid", "79"}, "gpu: "},
		{[]string{"--node", "sim-0002", "--gpu", "1", "--xid", "79"}, "hostname: "},
		{[]string{"--node", "sim-0001", "--gpu", "1", "--check", "nope"}, `check: unknown check "nope"`},
		{[]string{"--node", "sim-0001", "--xid", "79"}, "--gpu is required"},
		{[]string{"--node", "sim-0001", "--gpu", "1"}, "at least one of the flags"},
	} {
		if _, err := runSimInject(t, append([]string{"--control", control}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
	}

	if out, err = runSimInject(t, "--control", control, "--node", "sim-0001", "--clear"); err != nil || !strings.Contains(out, "sim-0001: 0 GPU signals") {
		t.Errorf("clear: %v\n%s", err, out)
	}
	if h, _ := fleet.GPUHealth("sim-0001"); len(h.GetSignals()) != 0 {
		t.Errorf("after clear: %v", h)
	}
	if s := fleet.Stats(); s.GPUSignals != 3 {
		t.Errorf("%d GPU signals injected, want 3", s.GPUSignals)
	}
}
