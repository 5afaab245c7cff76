package daemon_test

import (
	"strings"
	"testing"
	"time"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/gpuhealth"
)

func remedyInventory() *daemonv1.Inventory {
	return &daemonv1.Inventory{Hostname: "fake-remedy", Os: "linux", Cpus: 8, Gpus: []*daemonv1.Gpu{
		{Index: 0, Model: "NVIDIA H100 80GB HBM3", Uuid: "GPU-00000000-0000-4000-8000-000000000000", PciBusId: "00000000:18:00.0"},
		{Index: 1, Model: "NVIDIA H100 80GB HBM3", Uuid: "GPU-00000000-0000-4000-8000-000000000001", PciBusId: "00000000:2A:00.0"},
	}}
}

// TestFakeGPUReset: a reset that clears the fault removes that GPU's signals only; one that does
// not succeeds and leaves them; a scripted failure fails; an unknown GPU fails.
func TestFakeGPUReset(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	inv := remedyInventory()
	gpu0, gpu1 := inv.GetGpus()[0].GetUuid(), inv.GetGpus()[1].GetUuid()
	f := e.start("fake-remedy", daemon.FakeOptions{Inventory: inv, RebootDowntime: 100 * time.Millisecond})
	for _, g := range []string{gpu0, gpu1} {
		if err := f.InjectGPUSignal(&daemonv1.GpuSignal{GpuUuid: g, Check: gpuhealth.CheckXid, Code: 79}); err != nil {
			t.Fatal(err)
		}
	}

	// The zero Remedy: the reset succeeds, the fault stays.
	r := e.run(f, "gpuReset", `{"uuid": "`+gpu1+`"}`)
	if r.State != "succeeded" || r.Result["uuid"] != gpu1 || r.Result["reset"] != true || len(f.GPUHealth().GetSignals()) != 2 {
		t.Fatalf("reset that does not clear: %+v, signals %v", r, f.GPUHealth().GetSignals())
	}
	f.SetRemedy(gpu1, daemon.Remedy{ResetClears: true})
	if r := e.run(f, "gpuReset", `{"uuid": "`+gpu1+`"}`); r.State != "succeeded" {
		t.Fatalf("reset that clears: %+v", r)
	}
	if s := f.GPUHealth().GetSignals(); len(s) != 1 || s[0].GetGpuUuid() != gpu0 {
		t.Errorf("after clearing GPU 1: %v; want GPU 0's signal only", s)
	}
	f.SetRemedy(gpu0, daemon.Remedy{ResetFails: "Unable to reset GPU: in use by another client"})
	if r := e.run(f, "gpuReset", `{"uuid": "`+gpu0+`"}`); r.State != "failed" || !strings.Contains(r.Error, "in use by another client") {
		t.Errorf("scripted failure: %+v", r)
	}
	if len(f.GPUHealth().GetSignals()) != 1 {
		t.Errorf("a failed reset changed the signals: %v", f.GPUHealth().GetSignals())
	}
	if r := e.run(f, "gpuReset", `{"uuid": "GPU-00000000-0000-4000-8000-00000000dead"}`); r.State != "failed" || !strings.Contains(r.Error, "no GPU") {
		t.Errorf("unknown GPU: %+v", r)
	}
	// A draining node still resets, as bcd does.
	if r := e.run(f, "drain", `{}`); r.State != "succeeded" {
		t.Fatal(r)
	}
	if r := e.run(f, "gpuReset", `{"uuid": "`+gpu1+`"}`); r.State != "succeeded" {
		t.Errorf("reset while draining: %+v", r)
	}
}

// TestFakeDiagnose: pass by default; a GPU scripted to fail fails the command, naming it, with
// the result attached; unavailable only when every GPU says so.
func TestFakeDiagnose(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	inv := remedyInventory()
	gpu0, gpu1 := inv.GetGpus()[0].GetUuid(), inv.GetGpus()[1].GetUuid()
	f := e.start("fake-remedy", daemon.FakeOptions{Inventory: inv})

	r := e.run(f, "diagnose", `{}`)
	if r.State != "succeeded" || r.Result["result"] != "pass" || r.Result["level"] != 2.0 {
		t.Fatalf("default: %+v", r)
	}
	f.SetRemedy(gpu1, daemon.Remedy{Diagnose: daemon.DiagnoseFail})
	r = e.run(f, "diagnose", `{"level": 1}`)
	if r.State != "failed" || !strings.Contains(r.Error, "GPU Memory on GPU 1 ("+gpu1+")") || r.Result["result"] != "fail" || r.Result["level"] != 1.0 {
		t.Fatalf("failing GPU: %+v", r)
	}
	tests, _ := r.Result["tests"].([]any)
	mem, _ := tests[len(tests)-1].(map[string]any)
	if idx, _ := mem["gpuIndexes"].([]any); mem["result"] != "fail" || len(idx) != 1 || idx[0] != 1.0 {
		t.Errorf("memory test %v", mem)
	}
	f.SetRemedy(gpu0, daemon.Remedy{Diagnose: daemon.DiagnoseUnavailable})
	f.SetRemedy(gpu1, daemon.Remedy{Diagnose: daemon.DiagnoseUnavailable})
	if r := e.run(f, "diagnose", `{}`); r.State != "succeeded" || r.Result["result"] != "unavailable" || r.Result["tests"] != nil {
		t.Errorf("unavailable: %+v", r)
	}
	// One GPU without DCGM and one that passes: the node passes, its memory test skipping none.
	f.SetRemedy(gpu1, daemon.Remedy{})
	if r := e.run(f, "diagnose", `{}`); r.State != "succeeded" || r.Result["result"] != "pass" {
		t.Errorf("mixed: %+v", r)
	}
}
