package pools

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/better-compute/better-compute/gen/db"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/gpuhealth"
	"github.com/better-compute/better-compute/internal/remediation"
)

// Bounds of a pool's remediation policy, as pools.proto documents them.
const (
	// MaxRemediationNodes bounds RemediationPolicy.max_nodes (the column's CHECK).
	MaxRemediationNodes = 10000
	// DefaultFailureDomainLabel is the failure domain label of a pool created without a policy.
	DefaultFailureDomainLabel = "rack"
)

// remediationSettings are a pool's remediation columns.
type remediationSettings struct {
	auto     bool
	maxNodes int32
	domain   string
	// override is the rules and ladders, encoded (remediation.Override); "{}" for none.
	override []byte
}

// ladderName is a remediation ladder's name.
var ladderName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// remediationOverride reads a policy's rules and ladders into a remediation.Override, checked
// against the default policy, naming the field of what is wrong.
func remediationOverride(p *poolsv1.RemediationPolicy) ([]byte, error) {
	const field = "remediation"
	if n := len(p.GetRules()); n > remediation.MaxOverrideRules {
		return nil, apierr.InvalidArgument(field+".rules", "at most %d rules, got %d", remediation.MaxOverrideRules, n)
	}
	if n := len(p.GetLadders()); n > remediation.MaxOverrideLadders {
		return nil, apierr.InvalidArgument(field+".ladders", "at most %d ladders, got %d", remediation.MaxOverrideLadders, n)
	}
	var o remediation.Override
	for i, l := range p.GetLadders() {
		f := fmt.Sprintf("%s.ladders[%d]", field, i)
		if !ladderName.MatchString(l.GetName()) {
			return nil, apierr.InvalidArgument(f+".name", "must be 1 to 32 letters, digits, '-' and '_', got %q", l.GetName())
		}
		if _, dup := o.Ladders[l.GetName()]; dup {
			return nil, apierr.InvalidArgument(f+".name", "ladder %q is named twice", l.GetName())
		}
		if n := len(l.GetSteps()); n > remediation.MaxSteps {
			return nil, apierr.InvalidArgument(f+".steps", "at most %d steps, got %d", remediation.MaxSteps, n)
		}
		ladder := remediation.Ladder{}
		for j, st := range l.GetSteps() {
			step := remediation.Step{Action: st.GetAction(), Level: st.GetLevel()}
			if w := st.GetWindow(); w != nil {
				if err := w.CheckValid(); err != nil {
					return nil, apierr.InvalidArgument(fmt.Sprintf("%s.steps[%d].window", f, j), "%v", err)
				}
				step.Window = gpuhealth.Duration(w.AsDuration())
			}
			ladder.Steps = append(ladder.Steps, step)
		}
		if o.Ladders == nil {
			o.Ladders = map[string]remediation.Ladder{}
		}
		o.Ladders[l.GetName()] = ladder
	}
	for i, r := range p.GetRules() {
		if n := len(r.GetCodes()); n > 64 {
			return nil, apierr.InvalidArgument(fmt.Sprintf("%s.rules[%d].codes", field, i), "at most 64 codes, got %d", n)
		}
		o.Rules = append(o.Rules, remediation.Rule{Check: r.GetCheck(), Codes: r.GetCodes(), Ladder: r.GetLadder()})
	}
	if err := o.Check(remediation.DefaultPolicy()); err != nil {
		return nil, apierr.InvalidArgument(field, "%v", err)
	}
	if o.IsZero() {
		return []byte("{}"), nil
	}
	return json.Marshal(o)
}

// remediationPolicy validates a request's remediation policy into the pool's columns; nil is
// remediations on, one member at a time, with the failure domain label unset (dflt on create).
func remediationPolicy(p *poolsv1.RemediationPolicy, dflt string) (remediationSettings, error) {
	if p == nil {
		return remediationSettings{auto: true, maxNodes: 1, domain: dflt, override: []byte("{}")}, nil
	}
	var errs []error
	n := p.GetMaxNodes()
	switch {
	case n == 0:
		n = 1
	case n < 0 || n > MaxRemediationNodes:
		errs = append(errs, apierr.InvalidArgument("remediation.max_nodes", "must be 1 to %d (0 means 1), got %d", MaxRemediationNodes, n))
	}
	if l := p.GetFailureDomainLabel(); l != "" && !fleet.ValidLabelKey(l) {
		errs = append(errs, apierr.InvalidArgument("remediation.failure_domain_label", "must be a node label key or empty, got %q", l))
	}
	override, err := remediationOverride(p)
	if err != nil {
		errs = append(errs, err)
	}
	if err := apierr.Join(errs...); err != nil {
		return remediationSettings{}, err
	}
	return remediationSettings{auto: !p.GetDisabled(), maxNodes: n, domain: p.GetFailureDomainLabel(), override: override}, nil
}

// remediationToProto is a stored pool's remediation policy.
func remediationToProto(r db.Pool) *poolsv1.RemediationPolicy {
	out := &poolsv1.RemediationPolicy{Disabled: !r.RemediationAuto, MaxNodes: r.RemediationMaxNodes, FailureDomainLabel: r.RemediationDomain}
	var o remediation.Override
	_ = json.Unmarshal(r.RemediationOverride, &o) // written by remediationOverride
	for _, rule := range o.Rules {
		out.Rules = append(out.Rules, &poolsv1.RemediationRule{Check: rule.Check, Codes: rule.Codes, Ladder: rule.Ladder})
	}
	for _, name := range slices.Sorted(maps.Keys(o.Ladders)) {
		l := &poolsv1.RemediationLadder{Name: name}
		for _, st := range o.Ladders[name].Steps {
			step := &poolsv1.RemediationStep{Action: st.Action, Level: st.Level}
			if st.Window > 0 {
				step.Window = durationpb.New(time.Duration(st.Window))
			}
			l.Steps = append(l.Steps, step)
		}
		out.Ladders = append(out.Ladders, l)
	}
	return out
}
