package workflow

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	workflowsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/workflows/v1"
	"github.com/better-compute/better-compute/internal/command"
)

// Action types: what a workflow does to each node between drain and uncordon.
const (
	ActionUpgrade   = "upgrade"
	ActionReboot    = "reboot"
	ActionDrain     = "drain"
	ActionConfigure = "configure"
	ActionExec      = "exec"
	ActionGPUReset  = "gpuReset"
	ActionDiagnose  = "diagnose"
)

// ActionType names the set case of an action, or "" when none is set.
func ActionType(a *workflowsv1.Action) string {
	switch a.GetKind().(type) {
	case *workflowsv1.Action_Upgrade:
		return ActionUpgrade
	case *workflowsv1.Action_Reboot:
		return ActionReboot
	case *workflowsv1.Action_Drain:
		return ActionDrain
	case *workflowsv1.Action_Configure:
		return ActionConfigure
	case *workflowsv1.Action_Exec:
		return ActionExec
	case *workflowsv1.Action_GpuReset:
		return ActionGPUReset
	case *workflowsv1.Action_Diagnose:
		return ActionDiagnose
	}
	return ""
}

// ValidateAction checks an action with the bounds of the command it becomes; a *command.FieldError
// names the field under the action's case (for example "upgrade.version"). ValidateTarget checks
// what depends on the target too (a gpuReset names one node's GPU).
func ValidateAction(a *workflowsv1.Action) error {
	typ := ActionType(a)
	if typ == "" {
		return &command.FieldError{Field: "kind", Msg: "set one of upgrade, reboot, drain, configure, exec, gpuReset and diagnose"}
	}
	_, p, ok := Command(a)
	if !ok {
		return nil
	}
	err := command.Validate(p)
	if fe, isField := errors.AsType[*command.FieldError](err); isField {
		return &command.FieldError{Field: typ + "." + fe.Field, Msg: fe.Msg}
	}
	if err != nil {
		return &command.FieldError{Field: typ, Msg: err.Error()}
	}
	return nil
}

// ValidateTarget checks an action against its target: a gpuReset names one GPU by UUID, which
// one node has, so its target must be node_ids with exactly one node.
func ValidateTarget(a *workflowsv1.Action, t *workflowsv1.Target) error {
	if ActionType(a) != ActionGPUReset {
		return nil
	}
	if n := len(t.GetNodeIds()); n != 1 || t.GetPoolId() != "" || len(t.GetLabelSelector()) > 0 {
		return &command.FieldError{Field: "target", Msg: fmt.Sprintf("a gpuReset resets one GPU: target node_ids with the one node that has it (got %d node ids)", n)}
	}
	return nil
}

// Command is the command the act step sends for an action: its type and payload; ok is false for
// a drain, whose act step sends nothing.
func Command(a *workflowsv1.Action) (typ string, payload proto.Message, ok bool) {
	switch k := a.GetKind().(type) {
	case *workflowsv1.Action_Upgrade:
		return command.Upgrade, &daemonv1.UpgradePayload{Version: k.Upgrade.GetVersion()}, true
	case *workflowsv1.Action_Reboot:
		return command.Reboot, &daemonv1.RebootPayload{}, true
	case *workflowsv1.Action_Configure:
		return command.Configure, k.Configure, true
	case *workflowsv1.Action_Exec:
		return command.Exec, k.Exec, true
	case *workflowsv1.Action_GpuReset:
		return command.GpuReset, k.GpuReset, true
	case *workflowsv1.Action_Diagnose:
		return command.Diagnose, k.Diagnose, true
	}
	return "", nil, false
}

// EncodeAction is the stored form of an action (protojson, camelCase).
func EncodeAction(a *workflowsv1.Action) ([]byte, error) {
	b, err := protojson.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("encode workflow action: %w", err)
	}
	return b, nil
}

// DecodeAction reads a stored action.
func DecodeAction(b []byte) (*workflowsv1.Action, error) {
	a := &workflowsv1.Action{}
	if err := protojson.Unmarshal(b, a); err != nil {
		return nil, fmt.Errorf("decode workflow action: %w", err)
	}
	return a, nil
}

// EncodeTarget is the stored form of a target.
func EncodeTarget(t *workflowsv1.Target) ([]byte, error) {
	b, err := protojson.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("encode workflow target: %w", err)
	}
	return b, nil
}

// DecodeTarget reads a stored target.
func DecodeTarget(b []byte) (*workflowsv1.Target, error) {
	t := &workflowsv1.Target{}
	if err := protojson.Unmarshal(b, t); err != nil {
		return nil, fmt.Errorf("decode workflow target: %w", err)
	}
	return t, nil
}
