package fleet

import (
	"encoding/json"
	"fmt"
	"time"
)

// Condition statuses.
const (
	StatusTrue    = "True"
	StatusFalse   = "False"
	StatusUnknown = "Unknown"
)

// Condition types.
const (
	// ConditionSpecApplied tells whether the node has caught up with its spec (the node.spec
	// reconciler): True when applied, Unknown while being applied, False when a step failed.
	ConditionSpecApplied = "SpecApplied"
	// ConditionSchedulable tells whether new work may be placed on the node (the node.lifecycle
	// reconciler): True when it is ready, online and not revoked.
	ConditionSchedulable = "Schedulable"
)

// Condition is one entry of nodes.conditions, Kubernetes-style.
type Condition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"`
	Reason             string    `json:"reason"`
	Message            string    `json:"message"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
	ObservedGeneration int64     `json:"observedGeneration,omitempty"`
}

// DecodeConditions reads nodes.conditions.
func DecodeConditions(b []byte) ([]Condition, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var cs []Condition
	if err := json.Unmarshal(b, &cs); err != nil {
		return nil, fmt.Errorf("decode conditions: %w", err)
	}
	return cs, nil
}

// EncodeConditions is the JSON array nodes.conditions stores; never null.
func EncodeConditions(cs []Condition) []byte {
	if len(cs) == 0 {
		return []byte("[]")
	}
	b, _ := json.Marshal(cs)
	return b
}

// FindCondition returns the condition of a type, if there is one.
func FindCondition(cs []Condition, typ string) (Condition, bool) {
	for _, c := range cs {
		if c.Type == typ {
			return c, true
		}
	}
	return Condition{}, false
}

// SetCondition puts c in cs, in place of the condition of its type, keeping that one's
// LastTransitionTime unless the status changes (now is used for a new status). It reports
// whether anything changed, and whether the status or reason did (a transition worth an event).
func SetCondition(cs []Condition, c Condition, now time.Time) (out []Condition, changed, transition bool) {
	for i, old := range cs {
		if old.Type != c.Type {
			continue
		}
		c.LastTransitionTime = old.LastTransitionTime
		if old.Status != c.Status {
			c.LastTransitionTime = now.UTC()
		}
		if old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message &&
			old.ObservedGeneration == c.ObservedGeneration && old.LastTransitionTime.Equal(c.LastTransitionTime) {
			return cs, false, false
		}
		out = append([]Condition(nil), cs...)
		out[i] = c
		return out, true, old.Status != c.Status || old.Reason != c.Reason
	}
	c.LastTransitionTime = now.UTC()
	return append(append([]Condition(nil), cs...), c), true, true
}
