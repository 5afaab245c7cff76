package remediation

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// Bounds of an Override.
const (
	MaxOverrideRules   = 32
	MaxOverrideLadders = 8
)

// Override is a pool's change to the remediation policy (pools.remediation_override): rules
// tried before the policy's, and ladders that replace the policy's of the same name or add new
// ones.
type Override struct {
	Rules   []Rule            `json:"rules,omitempty"`
	Ladders map[string]Ladder `json:"ladders,omitempty"`
}

// IsZero reports whether the override changes nothing.
func (o Override) IsZero() bool { return len(o.Rules) == 0 && len(o.Ladders) == 0 }

// ParseOverride reads and checks an override against the policy it applies to: every ladder is
// a ladder (drain first, service last, known actions in bounds), every rule names a ladder of
// the override or the policy.
func ParseOverride(b []byte, p Policy) (Override, error) {
	var o Override
	if err := json.Unmarshal(b, &o); err != nil {
		return o, fmt.Errorf("remediation override: %w", err)
	}
	return o, o.Check(p)
}

// Check is ParseOverride's checks of an override already read.
func (o Override) Check(p Policy) error {
	if n := len(o.Rules); n > MaxOverrideRules {
		return fmt.Errorf("remediation override: %d rules; at most %d", n, MaxOverrideRules)
	}
	if n := len(o.Ladders); n > MaxOverrideLadders {
		return fmt.Errorf("remediation override: %d ladders; at most %d", n, MaxOverrideLadders)
	}
	for _, name := range slices.Sorted(maps.Keys(o.Ladders)) {
		if name == "" {
			return fmt.Errorf("remediation override: a ladder has no name")
		}
		if err := o.Ladders[name].check(); err != nil {
			return fmt.Errorf("remediation override: ladder %q: %w", name, err)
		}
	}
	for i, r := range o.Rules {
		_, own := o.Ladders[r.Ladder]
		if _, dflt := p.Ladders[r.Ladder]; !own && !dflt {
			return fmt.Errorf("remediation override: rule %d names no ladder (%q)", i, r.Ladder)
		}
	}
	return nil
}

// With is the policy with the overrides applied in order: their rules first (the first
// override's first), their ladders replacing the policy's of the same name (a later override's
// winning). The version says that overrides applied.
func (p Policy) With(overrides ...Override) Policy {
	if len(overrides) == 0 {
		return p
	}
	out := p
	out.Ladders = maps.Clone(p.Ladders)
	out.Rules = nil
	for _, o := range overrides {
		out.Rules = append(out.Rules, o.Rules...)
		maps.Copy(out.Ladders, o.Ladders)
	}
	out.Rules = append(out.Rules, p.Rules...)
	out.Version = p.Version + "+pools"
	return out
}
