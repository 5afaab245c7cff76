package daemon

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
)

// Diagnose outcomes a Remedy scripts, which are also DiagnoseResult.result's values.
const (
	DiagnosePass        = "pass"
	DiagnoseFail        = "fail"
	DiagnoseUnavailable = "unavailable"
)

// fakeDiagnoseTest is the test a FakeDaemon's diagnose fails a GPU on (DCGM's memory test, the
// one a GPU with uncorrectable memory errors fails).
const fakeDiagnoseTest = "GPU Memory"

// Remedy is how a FakeDaemon's GPU answers the remediation commands, so that tests and the
// simulator can play each outcome a remediation policy must handle. The zero Remedy is a GPU
// whose reset succeeds without clearing its signals and whose diagnostics pass.
type Remedy struct {
	// ResetClears makes a gpuReset of the GPU clear its signals (as a reset clears a
	// recoverable Xid); without it the reset succeeds and the signals stay, a fault a reset does
	// not fix.
	ResetClears bool
	// ResetFails, when set, makes a gpuReset of the GPU fail with this message (nothing changes).
	ResetFails string
	// Diagnose is the GPU's diagnose outcome: "pass" (or empty), "fail" (the memory test fails
	// on it) or "unavailable" (no DCGM: the node's result is "unavailable" when every GPU says so).
	Diagnose string
}

// SetRemedy scripts how the GPU uuid answers gpuReset and diagnose from now on; it survives
// restarts and reboots, as a GPU's hardware does.
func (f *Fake) SetRemedy(uuid string, r Remedy) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.remedies == nil {
		f.remedies = map[string]Remedy{}
	}
	f.remedies[uuid] = r
}

func (f *Fake) remedy(uuid string) Remedy {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.remedies[uuid]
}

// gpuReset plays the GPU's Remedy: it fails with ResetFails, or succeeds with bcd's result
// {"uuid", "reset": true}, clearing the GPU's signals when ResetClears. A draining node runs
// it, as bcd does.
func (f *Fake) gpuReset(_ context.Context, c *daemonv1.Command) (*structpb.Struct, error) {
	uuid := c.GetGpuReset().GetUuid()
	if !slices.ContainsFunc(f.inventory.Load().GetGpus(), func(g *daemonv1.Gpu) bool { return g.GetUuid() == uuid }) {
		return nil, fmt.Errorf("gpuReset: this node has no GPU %s", uuid)
	}
	r := f.remedy(uuid)
	if r.ResetFails != "" {
		return nil, fmt.Errorf("gpuReset %s: %s (a FakeDaemon's scripted failure)", uuid, r.ResetFails)
	}
	if r.ResetClears {
		f.clearGPU(uuid)
	}
	f.opts.Logger.Info("fake daemon: GPU reset", "gpu", uuid, "cleared", r.ResetClears)
	return structpb.NewStruct(map[string]any{"uuid": uuid, "reset": true})
}

// clearGPU removes the signals of one GPU and publishes the new snapshot, as bcd's next one
// leaves out what a reset cleared.
func (f *Fake) clearGPU(uuid string) {
	h := &f.gpu
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.signals)
	h.signals = slices.DeleteFunc(h.signals, func(s *daemonv1.GpuSignal) bool { return s.GetGpuUuid() == uuid })
	if len(h.signals) != n {
		h.publishLocked()
	}
}

// diagnose returns the DiagnoseResult bcd would from the GPUs' scripted outcomes: a software
// test that passes and the memory test, failing on each GPU whose Diagnose is "fail" (the
// command then fails, naming them, with the result attached as bcd attaches it), skipped on
// those without DCGM; "unavailable" when every GPU says so.
func (f *Fake) diagnose(_ context.Context, c *daemonv1.Command) (*structpb.Struct, error) {
	level := c.GetDiagnose().GetLevel()
	if level == 0 {
		level = 2
	}
	res := &daemonv1.DiagnoseResult{Result: DiagnoseUnavailable, Level: level}
	memory := &daemonv1.DiagnoseTest{Name: fakeDiagnoseTest, Result: "skip"}
	var failed, info []string
	for _, g := range f.inventory.Load().GetGpus() {
		switch f.remedy(g.GetUuid()).Diagnose {
		case DiagnoseUnavailable:
			continue
		case DiagnoseFail:
			memory.Result = DiagnoseFail
			memory.GpuIndexes = append(memory.GpuIndexes, g.GetIndex())
			failed = append(failed, fmt.Sprintf("%d (%s)", g.GetIndex(), g.GetUuid()))
			info = append(info, fmt.Sprintf("GPU %d: uncorrectable memory errors (a FakeDaemon's scripted outcome)", g.GetIndex()))
		default:
			if memory.Result == "skip" {
				memory.Result = DiagnosePass
			}
		}
		res.Result = DiagnosePass
	}
	if res.Result == DiagnoseUnavailable {
		return fakeResultStruct(res)
	}
	memory.Info = strings.Join(info, "\n")
	res.DcgmVersion = "fake"
	res.Tests = []*daemonv1.DiagnoseTest{{Name: "Software", Result: DiagnosePass}, memory}
	if len(failed) > 0 {
		res.Result = DiagnoseFail
	}
	out, err := fakeResultStruct(res)
	if err != nil || len(failed) == 0 {
		return out, err
	}
	return out, fmt.Errorf("diagnose level %d: failed: %s on GPU %s", level, fakeDiagnoseTest, strings.Join(failed, ", "))
}

// fakeResultStruct is a result message as bcd sends it: its JSON form (camelCase fields).
func fakeResultStruct(m proto.Message) (*structpb.Struct, error) {
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode the result: %w", err)
	}
	out := &structpb.Struct{}
	if err := protojson.Unmarshal(b, out); err != nil {
		return nil, fmt.Errorf("encode the result: %w", err)
	}
	return out, nil
}
