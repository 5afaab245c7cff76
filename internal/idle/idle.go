// Package idle is the vocabulary of idle leases: a pool's idle policy (a lease whose GPUs'
// mean utilisation stays under a threshold for a window is told, and, where the pool says so,
// released after a grace period), as pools store it and the idle job applies it.
package idle

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Actions of a policy.
const (
	// ActionNotify tells the lease's tenant (lease.idle) and leaves the lease running.
	ActionNotify = "notify"
	// ActionRelease tells the tenant, then releases the lease (reason "idle: …") once the grace
	// period has passed and it is still idle.
	ActionRelease = "release"
	// ActionLend tells the tenant, then, once the grace period has passed and it is still idle,
	// lends the lease's GPUs to other tenants' leases until the holder wakes (leases/wake, or
	// tunnel activity where TunnelCountsAsUse); the lease stays placed and is not billed for
	// them while they are lent.
	ActionLend = "lend"
)

// Bounds of a policy.
const (
	MinWindow = 5 * time.Minute
	MaxWindow = 24 * time.Hour
	MaxGrace  = 24 * time.Hour
)

// Policy is a pool's idle policy (pools.idle_policy); the zero Policy is none.
type Policy struct {
	// MinUtilization is the mean GPU utilisation (percent) under which a lease is idle.
	MinUtilization float64 `json:"minUtilization"`
	// WindowMs is how long the mean is taken over: a lease is judged once placed that long, and
	// only when the window was sampled throughout.
	WindowMs int64 `json:"windowMs"`
	// Action is ActionNotify or ActionRelease.
	Action string `json:"action"`
	// GraceMs is how long an idle lease is told before it is released (ActionRelease).
	GraceMs int64 `json:"graceMs,omitempty"`
	// AllowOptOut lets leases/create take idle_opt_out: such a lease is never judged.
	AllowOptOut bool `json:"allowOptOut,omitempty"`
	// TunnelCountsAsUse: a lease whose nodes had a tunnel of its tenant open within the window
	// is not idle, and a lent one wakes.
	TunnelCountsAsUse bool `json:"tunnelCountsAsUse,omitempty"`
}

// IsZero reports whether the policy is none.
func (p Policy) IsZero() bool { return p == Policy{} }

// Window and Grace are the policy's durations.
func (p Policy) Window() time.Duration { return time.Duration(p.WindowMs) * time.Millisecond }

// Grace is how long an idle lease is told before it is released or lent.
func (p Policy) Grace() time.Duration { return time.Duration(p.GraceMs) * time.Millisecond }

// Check reports what is wrong with a policy, naming its field as the API does.
func (p Policy) Check() (field string, err error) {
	switch {
	case p.MinUtilization <= 0 || p.MinUtilization > 100:
		return "min_utilization", fmt.Errorf("must be above 0 and at most 100, got %v", p.MinUtilization)
	case p.Window() < MinWindow || p.Window() > MaxWindow:
		return "window", fmt.Errorf("must be %v to %v, got %v", MinWindow, MaxWindow, p.Window())
	case p.Action != ActionNotify && p.Action != ActionRelease && p.Action != ActionLend:
		return "action", errors.New("must be NOTIFY, RELEASE or LEND")
	case p.Grace() < 0 || p.Grace() > MaxGrace:
		return "grace", fmt.Errorf("must be 0s to %v, got %v", MaxGrace, p.Grace())
	}
	return "", nil
}

// Decode reads a stored policy; "{}" is none.
func Decode(b []byte) (Policy, error) {
	var p Policy
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("idle policy: %w", err)
	}
	return p, nil
}

// Sampled reports whether minutes sampled minutes cover the policy's window: all of them but
// the one in progress at its edge.
func (p Policy) Sampled(minutes int64) bool {
	return minutes >= int64(p.Window()/time.Minute)-1
}
