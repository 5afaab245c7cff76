package gpuhealth

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// LeaseAction is what a pool does with a lease whose GPU becomes unhealthy (pools.v1's
// UnhealthyLeaseAction).
type LeaseAction string

// Lease actions.
const (
	// LeaseKeep (and the empty action) leaves the lease running: it is told
	// (lease.gpu_unhealthy) and its holder decides.
	LeaseKeep LeaseAction = "keep"
	// LeaseEnd ends the lease (failed) in the transaction that makes its GPU unhealthy, so the
	// placer may place its work again on healthy GPUs.
	LeaseEnd LeaseAction = "end"
)

// Limits of a pool's override, enforced by the pools API.
const (
	// MaxOverrideRules is the most rules one pool's override may have.
	MaxOverrideRules = 64
	// MaxRuleCodes is the most codes one rule may name.
	MaxRuleCodes = 64
	// MaxRuleWindow is the longest window a rule may have.
	MaxRuleWindow = 24 * time.Hour
)

// Override is a pool's GPU health policy override (pools.gpu_health_policy, JSON): rules tried
// before the default policy's on the pool's members, and what to do with a lease of the pool
// whose GPU becomes unhealthy. The zero Override changes nothing.
type Override struct {
	Rules            []Rule      `json:"rules,omitempty"`
	OnUnhealthyLease LeaseAction `json:"onUnhealthyLease,omitempty"`
}

// IsZero reports whether o changes nothing and says nothing (no rules, no action set).
func (o Override) IsZero() bool { return len(o.Rules) == 0 && o.OnUnhealthyLease == "" }

// Check reports the first thing wrong with o, naming the field as the pools API does
// ("rules[2].effect"), with what is wrong.
func (o Override) Check() (field, problem string) {
	if n := len(o.Rules); n > MaxOverrideRules {
		return "rules", fmt.Sprintf("at most %d rules, got %d", MaxOverrideRules, n)
	}
	for i, r := range o.Rules {
		at := fmt.Sprintf("rules[%d].", i)
		switch {
		case !slices.Contains(Checks, r.Check):
			return at + "check", fmt.Sprintf("unknown check %q", r.Check)
		case !r.Effect.Valid():
			return at + "effect", fmt.Sprintf("unknown effect %q (ignore, degrade, quarantine_gpu, quarantine_node or drain_node)", r.Effect)
		case len(r.Codes) > MaxRuleCodes:
			return at + "codes", fmt.Sprintf("at most %d codes, got %d", MaxRuleCodes, len(r.Codes))
		case r.MinCount < 0:
			return at + "min_count", "must not be negative"
		case r.Window < 0 || time.Duration(r.Window) > MaxRuleWindow:
			return at + "window", fmt.Sprintf("must be 0s to %v, got %v", MaxRuleWindow, time.Duration(r.Window))
		}
	}
	switch o.OnUnhealthyLease {
	case "", LeaseKeep, LeaseEnd:
	default:
		return "on_unhealthy_lease", fmt.Sprintf("unknown action %q", o.OnUnhealthyLease)
	}
	return "", ""
}

// DecodeOverride reads a pools.gpu_health_policy column; empty is the zero Override.
func DecodeOverride(b []byte) (Override, error) {
	var o Override
	if len(b) == 0 {
		return o, nil
	}
	if err := json.Unmarshal(b, &o); err != nil {
		return Override{}, fmt.Errorf("decode a pool's GPU health policy: %w", err)
	}
	return o, nil
}

// EncodeOverride writes a pools.gpu_health_policy column: "{}" for the zero Override.
func EncodeOverride(o Override) ([]byte, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("encode a pool's GPU health policy: %w", err)
	}
	return b, nil
}

// Policies is the policy a node is judged by: the default policy as each pool the node is a
// member of overrides it. For every pool, a signal's rule is the first of the pool's override
// rules, then of the default's, that matches; the signal then takes the strongest effect any
// pool gives it, so one pool cannot weaken what another requires. With no pool it is the
// default policy. Evaluate and Match work as Policy's.
type Policies struct {
	base      Policy
	overrides [][]Rule
}

// Combine is the policy of a node in the pools whose override rules are overrides (one entry per
// pool, in a stable order; an entry may be empty), on top of base. The clean period is base's.
func Combine(base Policy, overrides ...[]Rule) Policies {
	return Policies{base: base, overrides: overrides}
}

// Default is the policy the pools override.
func (p Policies) Default() Policy { return p.base }

// candidates returns, for every pool (or the default alone, with none), the rule that decides a
// signal's effect there; a pool with no matching rule gives none.
func (p Policies) candidates(check string, code, count int64) []Rule {
	if len(p.overrides) == 0 {
		return p.base.candidates(check, code, count)
	}
	out := make([]Rule, 0, len(p.overrides))
	for _, rules := range p.overrides {
		if r, ok := match(rules, check, code, count); ok {
			out = append(out, r)
		} else if r, ok := p.base.Match(check, code, count); ok {
			out = append(out, r)
		}
	}
	return out
}

// clean is the policy's clean period.
func (p Policies) clean() time.Duration { return time.Duration(p.base.CleanPeriod) }

// Match returns the rule that decides a signal's effect whatever its age: the strongest of the
// pools' (ties go to the rule without a window, then to the longer window, then to the first
// pool's), and false when no pool's policy has one.
func (p Policies) Match(check string, code, count int64) (Rule, bool) {
	var best Rule
	found := false
	for _, r := range p.candidates(check, code, count) {
		if !found || outranks(r, best) {
			best, found = r, true
		}
	}
	return best, found
}

// Evaluate applies the policies to one GPU at now, as Policy.Evaluate does; a signal's rule is,
// among the pools' rules still within their windows at now, the strongest.
func (p Policies) Evaluate(in Input, now time.Time) Result { return evaluate(p, in, now) }

// outranks reports whether rule r gives a signal more than rule o: a stronger effect, or the same
// effect for longer (no window, or a longer one).
func outranks(r, o Rule) bool {
	if r.Effect != o.Effect {
		return r.Effect.Stronger(o.Effect)
	}
	switch {
	case o.Window == 0:
		return false
	case r.Window == 0:
		return true
	default:
		return r.Window > o.Window
	}
}
