package nodecontrol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"time"
)

// Spec is a node's desired state as nodes.spec stores it. A field left out is not managed: the
// initial spec, {}, changes nothing on the node.
type Spec struct {
	// Labels, when not nil, are exactly the labels the node should have (an empty map: none).
	Labels map[string]string `json:"labels,omitzero"`
	// Taints, when not nil, are exactly the taints the node should have.
	Taints []Taint `json:"taints,omitzero"`
	// DaemonVersion is the version the node's daemon should report; empty for any.
	DaemonVersion string `json:"daemonVersion,omitempty"`
	// Config is the daemon configuration (a JSON object) the node should have applied; nil for
	// none managed.
	Config json.RawMessage `json:"config,omitempty"`
	// Secrets are the names of the tenant's secrets the node may fetch from its gateway (which
	// reads them from nodes.spec), sorted and without duplicates.
	Secrets []string `json:"secrets,omitempty"`
}

// Taint effects.
const (
	EffectNoSchedule       = "NoSchedule"
	EffectPreferNoSchedule = "PreferNoSchedule"
	EffectNoExecute        = "NoExecute"
)

// Taint is one taint as nodes.taints and the spec store it.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Effect string `json:"effect"`
}

// DecodeSpec reads a stored spec; an empty one is the zero Spec.
func DecodeSpec(b []byte) (Spec, error) {
	var s Spec
	if len(b) == 0 {
		return s, nil
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return Spec{}, fmt.Errorf("decode node spec: %w", err)
	}
	if bytes.Equal(bytes.TrimSpace(s.Config), []byte("null")) {
		s.Config = nil
	}
	return s, nil
}

// Encode is the JSON object nodes.spec stores.
func (s Spec) Encode() []byte {
	b, err := json.Marshal(s)
	if err != nil {
		// Only an invalid Config can fail; the API validates it before it gets here.
		panic(fmt.Sprintf("encode node spec: %v", err))
	}
	return b
}

// DecodeTaints reads nodes.taints.
func DecodeTaints(b []byte) ([]Taint, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var ts []Taint
	if err := json.Unmarshal(b, &ts); err != nil {
		return nil, fmt.Errorf("decode taints: %w", err)
	}
	return ts, nil
}

// EncodeTaints is the JSON array nodes.taints stores; never null.
func EncodeTaints(ts []Taint) []byte {
	if len(ts) == 0 {
		return []byte("[]")
	}
	b, _ := json.Marshal(ts) // strings always encode
	return b
}

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

// jsonEqual reports whether two JSON documents hold the same value (jsonb equality: key order
// and number formatting do not matter). Either being empty counts as JSON null.
func jsonEqual(a, b []byte) bool {
	var va, vb any
	if len(a) > 0 {
		if err := json.Unmarshal(a, &va); err != nil {
			return false
		}
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &vb); err != nil {
			return false
		}
	}
	return reflect.DeepEqual(va, vb)
}
