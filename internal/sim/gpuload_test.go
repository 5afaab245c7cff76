package sim_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/gateway/gatewaytest"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/sim"
)

// TestGPULoads: a running fleet's GPUs get load profiles from the seed (mostly busy, some idle,
// some bursty), and the control socket's load call sets one GPU's, or every
// GPU's of a machine, naming the field at fault otherwise.
func TestGPULoads(t *testing.T) {
	t.Parallel()
	e := gatewaytest.New(t)
	gw := e.StartGateway("gw1", nil)
	const n = 12
	f := runFleet(t, sim.Options{
		Gateway: gw.Addr, RootPEM: e.Bundle.RootPEM(), Token: e.Token(n, time.Now().Add(time.Hour)), N: n, Seed: 5,
	})
	waitConnected(t, f)
	counts := map[string]int{}
	host := ""
	for i := range n {
		m := f.Machine(i)
		loads, err := f.GPULoads(m.Hostname)
		if err != nil {
			t.Fatal(err)
		}
		if len(loads) != len(m.Inventory.GetGpus()) {
			t.Errorf("%s: %d loads for %d GPUs", m.Hostname, len(loads), len(m.Inventory.GetGpus()))
		}
		for _, l := range loads {
			counts[l.Profile]++
		}
		if len(loads) >= 2 && host == "" {
			host = m.Hostname
		}
	}
	if host == "" {
		t.Fatal("no machine with two GPUs")
	}
	total := counts["busy"] + counts["idle"] + counts["bursty"]
	if total == 0 || counts["busy"]*2 < total || counts["busy"] == total {
		t.Errorf("profiles %v: want mostly busy, not all", counts)
	}
	path := filepath.Join(t.TempDir(), "sim.sock")
	ctx, cancel := context.WithCancel(t.Context())
	done, err := sim.StartControl(ctx, path, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-done })
	c := sim.NewControlClient(path)
	gpu := 1
	res, err := c.Load(t.Context(), sim.LoadRequest{Hostname: host, GPU: &gpu, Profile: "idle"})
	if err != nil || res.Hostname != host || res.GPUs[1].Profile != "idle" {
		t.Fatalf("load: %+v, %v", res, err)
	}
	res, err = c.Load(t.Context(), sim.LoadRequest{Hostname: host, Profile: "bursty"})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range res.GPUs {
		if l.Profile != string(daemon.LoadBursty) {
			t.Errorf("every GPU: %+v", res.GPUs)
		}
	}
	big := 99
	for _, tc := range []struct {
		req  sim.LoadRequest
		want string
	}{
		{sim.LoadRequest{Profile: "idle"}, "hostname: "},
		{sim.LoadRequest{Hostname: host, Profile: "warm"}, "profile: "},
		{sim.LoadRequest{Hostname: host, GPU: &big, Profile: "idle"}, "gpu: "},
		{sim.LoadRequest{Hostname: "sim-0999", Profile: "idle"}, "hostname: "},
	} {
		if _, err := c.Load(t.Context(), tc.req); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.req, err, tc.want)
		}
	}
}
