package remediation

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/better-compute/better-compute/internal/gpuhealth"
)

// Actions: what a step of a ladder does. drain prepares, gpuReset, reboot and powerCycle fix,
// diagnose and verify check, service hands the hardware to people.
const (
	// ActionDrain takes the node out of service: no new leases; the leases on it are told and,
	// after the pool's grace period, end with reason "remediation: <reason>".
	ActionDrain = "drain"
	// ActionGPUReset resets the GPU (command gpuReset); it fails while a process holds it.
	ActionGPUReset = "gpuReset"
	// ActionReboot reboots the host (command reboot).
	ActionReboot = "reboot"
	// ActionPowerCycle power-cycles a node that no longer answers, through its machine's
	// provider; it is skipped when the node answers, and unavailable for a node without one.
	ActionPowerCycle = "powerCycle"
	// ActionDiagnose runs DCGM's diagnostics (command diagnose); "unavailable" where DCGM is not
	// installed passes, leaving the check to the verify step after it.
	ActionDiagnose = "diagnose"
	// ActionVerify passes when the node answers and its GPUs stay healthy for the step's window
	// after their health signals were acknowledged.
	ActionVerify = "verify"
	// ActionReplace replaces the machine behind the node with a new one of its class, through
	// its provider (a cloud machine); the remediation then ends, succeeded, and the node goes
	// with its machine. Unavailable for a node without one.
	ActionReplace = "replace"
	// ActionService ends the remediation in state service: the hardware needs people.
	ActionService = "service"
)

// fixes are the actions that start a rung: a step that fails moves to the next of them.
var fixes = []string{ActionGPUReset, ActionReboot, ActionPowerCycle, ActionReplace, ActionService}

// IsFix reports whether an action starts a rung of a ladder.
func IsFix(action string) bool { return slices.Contains(fixes, action) }

// Step is one step of a ladder.
type Step struct {
	Action string `json:"action"`
	// Level is a diagnose's DCGM level (1 to 4).
	Level int32 `json:"level,omitempty"`
	// Window is how long a verify watches the GPUs stay healthy.
	Window gpuhealth.Duration `json:"window,omitempty"`
}

// Ladder is the steps a remediation takes, in order: drain, then rungs (a fix and its checks),
// then service. A rung whose checks all pass puts the node back in service; a step that fails
// moves to the next rung.
type Ladder struct {
	Description string `json:"description"`
	Steps       []Step `json:"steps"`
}

// Rule maps a health signal to a ladder: the first rule whose check (empty: any) and codes
// (empty: any) match the strongest reason of the remediation.
type Rule struct {
	Check  string  `json:"check,omitempty"`
	Codes  []int64 `json:"codes,omitempty"`
	Ladder string  `json:"ladder"`
}

// Repeat is when a GPU goes to service instead of another remediation: Count remediations of
// its serial within the window.
type Repeat struct {
	Count  int                `json:"count"`
	Within gpuhealth.Duration `json:"within"`
}

// Policy is the remediation policy: ladders by name and the rules that pick one. It is data
// (ladders.json), versioned, so an operator reads what the fleet will do.
type Policy struct {
	Version string            `json:"version"`
	Source  string            `json:"source"`
	Ladders map[string]Ladder `json:"ladders"`
	Rules   []Rule            `json:"rules"`
	Repeat  Repeat            `json:"repeat"`
}

//go:embed ladders.json
var defaultPolicy []byte

// MaxSteps bounds a ladder.
const MaxSteps = 16

// DefaultPolicy is the built-in policy, read once.
var DefaultPolicy = sync.OnceValue(func() Policy {
	p, err := ParsePolicy(defaultPolicy)
	if err != nil {
		panic(fmt.Sprintf("remediation: the built-in policy does not read: %v", err))
	}
	return p
})

// ParsePolicy reads and checks a policy: every rule names a ladder, every ladder starts with a
// drain and ends with service, its steps are known actions within bounds, and the last rule
// matches anything.
func ParsePolicy(b []byte) (Policy, error) {
	var p Policy
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("remediation policy: %w", err)
	}
	if p.Version == "" {
		return p, errors.New("remediation policy: no version")
	}
	for name, l := range p.Ladders {
		if err := l.check(); err != nil {
			return p, fmt.Errorf("remediation policy: ladder %q: %w", name, err)
		}
	}
	for i, r := range p.Rules {
		if _, ok := p.Ladders[r.Ladder]; !ok {
			return p, fmt.Errorf("remediation policy: rule %d names no ladder (%q)", i, r.Ladder)
		}
	}
	if n := len(p.Rules); n == 0 || p.Rules[n-1].Check != "" || len(p.Rules[n-1].Codes) > 0 {
		return p, errors.New("remediation policy: the last rule must match any signal")
	}
	if p.Repeat.Count < 1 || p.Repeat.Within <= 0 {
		return p, errors.New("remediation policy: repeat needs a count and a window")
	}
	return p, nil
}

func (l Ladder) check() error {
	n := len(l.Steps)
	switch {
	case n < 2 || n > MaxSteps:
		return fmt.Errorf("%d steps; 2 to %d", n, MaxSteps)
	case l.Steps[0].Action != ActionDrain:
		return errors.New("the first step must be drain")
	case l.Steps[n-1].Action != ActionService:
		return errors.New("the last step must be service")
	}
	for i, s := range l.Steps {
		switch s.Action {
		case ActionDrain, ActionGPUReset, ActionReboot, ActionPowerCycle, ActionReplace, ActionService:
		case ActionDiagnose:
			if s.Level < 1 || s.Level > 4 {
				return fmt.Errorf("step %d: diagnose level %d; 1 to 4", i, s.Level)
			}
		case ActionVerify:
			if s.Window <= 0 || time.Duration(s.Window) > 24*time.Hour {
				return fmt.Errorf("step %d: verify window %v; above 0 and at most 24h", i, time.Duration(s.Window))
			}
		default:
			return fmt.Errorf("step %d: unknown action %q", i, s.Action)
		}
	}
	return nil
}

// LadderFor is the ladder for a reason (its check and code) and the ladder's name.
func (p Policy) LadderFor(check string, code int64) (string, Ladder) {
	for _, r := range p.Rules {
		if (r.Check == "" || r.Check == check) && (len(r.Codes) == 0 || slices.Contains(r.Codes, code)) {
			return r.Ladder, p.Ladders[r.Ladder]
		}
	}
	return "", Ladder{} // unreachable: ParsePolicy makes the last rule match anything
}

// NextRung is the index of the step that starts the rung after step i (a fix or service), or
// len(steps) when none follows.
func NextRung(steps []Step, i int) int {
	for j := i + 1; j < len(steps); j++ {
		if IsFix(steps[j].Action) {
			return j
		}
	}
	return len(steps)
}

// RungPassed reports whether step i, which passed, is the last check of its rung: the node is
// then back in service.
func RungPassed(steps []Step, i int) bool {
	a := steps[i].Action
	if a != ActionVerify && a != ActionDiagnose {
		return false
	}
	next := i + 1
	return next >= len(steps) || IsFix(steps[next].Action)
}
