package workflow_test

import (
	"testing"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/workflow"
)

func TestRemediationActions(t *testing.T) {
	t.Parallel()
	reset := &workflowsv1.Action{Kind: &workflowsv1.Action_GpuReset{GpuReset: &daemonv1.GpuResetPayload{Uuid: "GPU-8f6e9a2c-1d3b-4c5e-9f7a-0b1c2d3e4f50"}}}
	diag := &workflowsv1.Action{Kind: &workflowsv1.Action_Diagnose{Diagnose: &daemonv1.DiagnosePayload{Level: 2}}}
	if typ, _, ok := workflow.Command(reset); !ok || typ != command.GpuReset || workflow.ActionType(reset) != workflow.ActionGPUReset {
		t.Errorf("gpuReset becomes %q", typ)
	}
	if typ, _, ok := workflow.Command(diag); !ok || typ != command.Diagnose {
		t.Errorf("diagnose becomes %q", typ)
	}
	if err := workflow.ValidateAction(&workflowsv1.Action{Kind: &workflowsv1.Action_GpuReset{GpuReset: &daemonv1.GpuResetPayload{Uuid: "nope"}}}); err == nil {
		t.Error("a gpuReset of no GPU passed")
	}
	if err := workflow.ValidateAction(&workflowsv1.Action{Kind: &workflowsv1.Action_Diagnose{Diagnose: &daemonv1.DiagnosePayload{Level: 9}}}); err == nil {
		t.Error("a diagnose of level 9 passed")
	}
	one := &workflowsv1.Target{NodeIds: []string{"n1"}}
	if err := workflow.ValidateTarget(reset, one); err != nil {
		t.Errorf("a gpuReset of one node: %v", err)
	}
	for _, tg := range []*workflowsv1.Target{{NodeIds: []string{"n1", "n2"}}, {PoolId: "p"}, {LabelSelector: map[string]string{"rack": "r1"}}} {
		if err := workflow.ValidateTarget(reset, tg); err == nil {
			t.Errorf("a gpuReset of %v passed", tg)
		}
	}
	if err := workflow.ValidateTarget(diag, &workflowsv1.Target{PoolId: "p"}); err != nil {
		t.Errorf("a diagnose of a pool: %v", err)
	}
}
