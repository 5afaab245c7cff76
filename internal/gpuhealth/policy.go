package gpuhealth

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Policy maps signals to effects. It is data: the default (DefaultPolicy) is policy.json in this
// package, versioned, taken from NVIDIA's Xid catalog and error recovery guidance.
type Policy struct {
	// Version names the policy; it changes with every change of the rules.
	Version string `json:"version"`
	// Source says where the rules come from.
	Source string `json:"source,omitempty"`
	// CleanPeriod is how long a signal must be gone (or, for a rule with a window, quiet) before
	// its reason leaves the GPU: flapping signals keep their effect.
	CleanPeriod Duration `json:"cleanPeriod"`
	// Rules are tried in order; the first that matches a signal decides its effect. A signal no
	// rule matches is ignored.
	Rules []Rule `json:"rules"`
}

// Rule matches signals of one check.
type Rule struct {
	Check string `json:"check"`
	// Codes, when set, are the codes it matches (Xids, recovery actions); empty matches any.
	Codes []int64 `json:"codes,omitempty"`
	// MinCount, when set, is the count a signal needs to match.
	MinCount int64  `json:"minCount,omitempty"`
	Effect   Effect `json:"effect"`
	// Window, when set, makes the signal count only while its last occurrence is this recent:
	// for events (an Xid) that say nothing once they are old.
	Window      Duration `json:"window,omitempty"`
	Description string   `json:"description"`
}

// Duration is a time.Duration written as Go writes durations ("15m").
type Duration time.Duration

// UnmarshalJSON reads "15m".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"15m\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes "15m0s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

//go:embed policy.json
var defaultPolicyJSON []byte

var defaultPolicy = func() Policy {
	p, err := ParsePolicy(defaultPolicyJSON)
	if err != nil {
		panic(err)
	}
	return p
}()

// DefaultPolicy returns the built-in policy.
func DefaultPolicy() Policy {
	p := defaultPolicy
	p.Rules = slices.Clone(p.Rules)
	return p
}

// ParsePolicy reads and checks a policy.
func ParsePolicy(b []byte) (Policy, error) {
	var p Policy
	if err := json.Unmarshal(b, &p); err != nil {
		return Policy{}, fmt.Errorf("GPU health policy: %w", err)
	}
	if p.Version == "" {
		return Policy{}, fmt.Errorf("GPU health policy: no version")
	}
	if p.CleanPeriod <= 0 {
		return Policy{}, fmt.Errorf("GPU health policy %s: cleanPeriod must be positive", p.Version)
	}
	for i, r := range p.Rules {
		if !slices.Contains(Checks, r.Check) {
			return Policy{}, fmt.Errorf("GPU health policy %s: rule %d: unknown check %q", p.Version, i, r.Check)
		}
		if !r.Effect.Valid() {
			return Policy{}, fmt.Errorf("GPU health policy %s: rule %d: unknown effect %q", p.Version, i, r.Effect)
		}
	}
	return p, nil
}

// Match returns the rule that decides a signal's effect, and false when none does (the signal
// is ignored).
func (p Policy) Match(check string, code, count int64) (Rule, bool) {
	return match(p.Rules, check, code, count)
}

// match returns the first of rules that matches a signal.
func match(rules []Rule, check string, code, count int64) (Rule, bool) {
	for _, r := range rules {
		if r.Check == check && (len(r.Codes) == 0 || slices.Contains(r.Codes, code)) && count >= r.MinCount {
			return r, true
		}
	}
	return Rule{}, false
}

// candidates is the rule that decides a signal's effect, if any: a policy alone has one.
func (p Policy) candidates(check string, code, count int64) []Rule {
	if r, ok := p.Match(check, code, count); ok {
		return []Rule{r}
	}
	return nil
}

// clean is the policy's clean period.
func (p Policy) clean() time.Duration { return time.Duration(p.CleanPeriod) }
