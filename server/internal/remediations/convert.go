package remediations

import (
	"encoding/json"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	remediationsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/remediations/v1"
	"github.com/better-compute/better-compute/internal/remediation"
)

// states maps the stored state (remediations.state) to the API's enum.
var states = map[string]remediationsv1.State{
	remediation.StateWaiting:   remediationsv1.State_STATE_WAITING,
	remediation.StateRunning:   remediationsv1.State_STATE_RUNNING,
	remediation.StateSucceeded: remediationsv1.State_STATE_SUCCEEDED,
	remediation.StateService:   remediationsv1.State_STATE_SERVICE,
	remediation.StateReturned:  remediationsv1.State_STATE_RETURNED,
	remediation.StateCancelled: remediationsv1.State_STATE_CANCELLED,
	remediation.StateFailed:    remediationsv1.State_STATE_FAILED,
}

// stateOf is the stored state an API state filters on; false for STATE_UNSPECIFIED and numbers
// the enum does not have.
func stateOf(s remediationsv1.State) (string, bool) {
	for k, v := range states {
		if v == s {
			return k, true
		}
	}
	return "", false
}

// reasonText is what a remediation repairs, for the API: "check code", or "manual: " and the
// operator's words.
func reasonText(r db.Remediation) string {
	if r.ReasonCheck == remediation.CheckManual && r.ReasonDetail != "" {
		return remediation.CheckManual + ": " + r.ReasonDetail
	}
	return remediation.Reason{Check: r.ReasonCheck, Code: r.ReasonCode}.String()
}

// stamp reads a history entry's time; unset when empty or unreadable.
func stamp(s string) *timestamppb.Timestamp {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil
	}
	return timestamppb.New(t)
}

// toProto describes a stored remediation with its node's hostname.
func toProto(r db.Remediation, hostname string) (*remediationsv1.Remediation, error) {
	steps, err := remediation.Steps(r)
	if err != nil {
		return nil, err
	}
	history, err := remediation.History(r)
	if err != nil {
		return nil, err
	}
	out := &remediationsv1.Remediation{
		Id: r.ID.String(), NodeId: r.NodeID.String(), Hostname: hostname, GpuUuid: r.GpuUuid, GpuSerial: r.GpuSerial,
		Reason: reasonText(r), Ladder: r.Ladder, PolicyVersion: r.PolicyVersion, State: states[r.State], Step: r.Step,
		FailureDomain: r.FailureDomain, CreateTime: timestamppb.New(r.CreatedAt), UpdateTime: timestamppb.New(r.UpdatedAt),
		Steps: make([]*remediationsv1.Step, 0, len(steps)), History: make([]*remediationsv1.HistoryEntry, 0, len(history)),
	}
	for _, s := range steps {
		st := &remediationsv1.Step{Action: s.Action, Level: s.Level}
		if s.Window > 0 {
			st.Window = durationpb.New(time.Duration(s.Window))
		}
		out.Steps = append(out.Steps, st)
	}
	for _, e := range history {
		if e.Step < 0 || e.Step > len(steps) {
			return nil, fmt.Errorf("remediation %s: history names step %d of %d", r.ID, e.Step, len(steps))
		}
		out.History = append(out.History, &remediationsv1.HistoryEntry{
			Step: int32(e.Step), Action: e.Action, Outcome: e.Outcome, Detail: e.Detail, //nolint:gosec // bounded above
			StartTime: stamp(e.StartedAt), EndTime: stamp(e.EndedAt),
		})
	}
	if r.EndedAt != nil {
		out.EndTime = timestamppb.New(*r.EndedAt)
	}
	if r.PrincipalID != nil {
		out.PrincipalId = r.PrincipalID.String()
	}
	return out, nil
}

// jsonHistory encodes a history for the remediations.history column.
func jsonHistory(h []remediation.Entry) ([]byte, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode the history: %w", err)
	}
	return b, nil
}
