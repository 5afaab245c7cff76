package remediation

import (
	"encoding/json"
	"fmt"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/event"
)

// Entry is one step's record in a remediation's history.
type Entry struct {
	Step    int    `json:"step"`
	Action  string `json:"action"`
	Outcome string `json:"outcome"`
	Detail  string `json:"detail,omitempty"`
	// StartedAt and EndedAt bound the step.
	StartedAt string `json:"startedAt"`
	EndedAt   string `json:"endedAt"`
}

// Outcomes of a step.
const (
	OutcomePassed      = "passed"
	OutcomeFailed      = "failed"
	OutcomeSkipped     = "skipped"
	OutcomeUnavailable = "unavailable"
)

// maxDetail bounds a history entry's detail.
const maxDetail = 1024

// Bounded cuts a detail to maxDetail bytes.
func Bounded(s string) string {
	if len(s) <= maxDetail {
		return s
	}
	return s[:maxDetail-3] + "..."
}

// Steps reads a remediation's planned steps.
func Steps(r db.Remediation) ([]Step, error) {
	var s []Step
	if err := json.Unmarshal(r.Steps, &s); err != nil {
		return nil, fmt.Errorf("remediation %s: steps: %w", r.ID, err)
	}
	return s, nil
}

// History reads a remediation's history.
func History(r db.Remediation) ([]Entry, error) {
	var h []Entry
	if err := json.Unmarshal(r.History, &h); err != nil {
		return nil, fmt.Errorf("remediation %s: history: %w", r.ID, err)
	}
	return h, nil
}

// Change is the payload of r's events.
func Change(r db.Remediation) event.RemediationChange {
	return event.RemediationChange{
		ID: r.ID, NodeID: r.NodeID, GPUUUID: r.GpuUuid, Reason: Reason{Check: r.ReasonCheck, Code: r.ReasonCode}.String(),
		Ladder: r.Ladder, State: r.State, Step: r.Step,
	}
}

// Started is r's remediation.started event.
func Started(r db.Remediation) event.RemediationStarted {
	return event.RemediationStarted{RemediationChange: Change(r)}
}
