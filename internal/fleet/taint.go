package fleet

import (
	"encoding/json"
	"fmt"
)

// Taint effects.
const (
	EffectNoSchedule       = "NoSchedule"
	EffectPreferNoSchedule = "PreferNoSchedule"
	EffectNoExecute        = "NoExecute"
)

// Taint keeps leases off a node unless they tolerate it, as in Kubernetes; it is one entry of
// nodes.taints and of a NodeSpec's taints. Only the effects NoSchedule and NoExecute keep leases
// off; PreferNoSchedule is a preference the placer ignores.
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Effect string `json:"effect"`
}

// Blocks reports whether the taint keeps untolerating leases off its node.
func (t Taint) Blocks() bool { return t.Effect == EffectNoSchedule || t.Effect == EffectNoExecute }

// Toleration lets a lease onto nodes with matching taints.
type Toleration struct {
	Key string `json:"key,omitempty"`
	// "Equal" (or empty): key and value match; "Exists": the key matches, and an empty key
	// matches every taint.
	Operator string `json:"operator,omitempty"`
	Value    string `json:"value,omitempty"`
	// Empty matches every effect.
	Effect string `json:"effect,omitempty"`
}

// Tolerates reports whether the toleration matches the taint.
func (t Toleration) Tolerates(taint Taint) bool {
	if t.Effect != "" && t.Effect != taint.Effect {
		return false
	}
	if t.Operator == "Exists" {
		return t.Key == "" || t.Key == taint.Key
	}
	return t.Key == taint.Key && t.Value == taint.Value
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
