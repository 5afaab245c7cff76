package gpuhealth

import (
	"cmp"
	"slices"
	"time"
)

// Signal is one daemon signal as the policy reads it (bettercompute.daemon.v1.GpuSignal without
// its GPU).
type Signal struct {
	Check     string
	Code      int64
	Count     int64
	FirstSeen time.Time
	LastSeen  time.Time
	Detail    string
}

// Input is everything the policy weighs for one GPU (or, with no Manual and no acknowledgements,
// for a node's node-wide signals).
type Input struct {
	// Signals are the daemon's signals of the GPU now.
	Signals []Signal
	// Previous are the reasons of the last evaluation: a signal that is gone keeps its reason for
	// the clean period.
	Previous []Reason
	// Manual is an operator's quarantine, if one holds.
	Manual *Manual
	// Acknowledged are the signals the last Clear acknowledged, at ClearedAt.
	Acknowledged []Acknowledged
	ClearedAt    time.Time
}

// Result is the policy's verdict.
type Result struct {
	Health Health
	// Reasons are every reason the policy acts on, strongest first; none when healthy.
	Reasons []Reason
	// Recheck, when not zero, is when the verdict may change without a new signal (a clean
	// period or a window ends): evaluate again then.
	Recheck time.Time
}

// Effect is the strongest effect of the result's reasons; EffectIgnore when it has none.
func (r Result) Effect() Effect {
	e := EffectIgnore
	for _, x := range r.Reasons {
		if x.Effect.Stronger(e) {
			e = x.Effect
		}
	}
	return e
}

// lifetimeCounter reports whether a check counts over the GPU's life (ECC aggregates): the same
// count seen again after a daemon restart, with a new first sighting, is still no new occurrence.
func lifetimeCounter(check string) bool {
	return check == CheckECCDoubleBit || check == CheckECCSingleBit
}

type reasonKey struct {
	check string
	code  int64
}

// Evaluate applies the policy to one GPU at now. It is pure: the same input gives the same
// result.
//
// A signal the policy ignores, or that the last Clear acknowledged (the same check and code, no
// higher count, and, unless it is a lifetime counter, first seen before the clear), gives no
// reason. A signal whose rule has a window counts only while it occurred within the window. A
// reason whose signal is gone stays for the clean period (damping a signal that comes and goes),
// then leaves; an operator's quarantine stays until Clear.
func (p Policy) Evaluate(in Input, now time.Time) Result { return evaluate(p, in, now) }

// judge is what evaluate applies: a Policy, or the Policies of a node's pools.
type judge interface {
	// candidates are the rules that may decide a signal's effect, one per policy that has one;
	// the strongest of those within their windows at now decides.
	candidates(check string, code, count int64) []Rule
	// clean is the clean period.
	clean() time.Duration
}

// evaluate is Evaluate for any judge.
func evaluate(j judge, in Input, now time.Time) Result {
	clean := j.clean()
	active := map[reasonKey]Reason{}
	var res Result
	recheck := func(t time.Time) {
		if res.Recheck.IsZero() || t.Before(res.Recheck) {
			res.Recheck = t
		}
	}
	for _, s := range in.Signals {
		if acknowledged(s, in.Acknowledged, in.ClearedAt) {
			continue
		}
		var rule Rule
		found := false
		for _, r := range j.candidates(s.Check, s.Code, s.Count) {
			if r.Effect == EffectIgnore {
				continue
			}
			if r.Window > 0 {
				until := s.LastSeen.Add(time.Duration(r.Window))
				if !now.Before(until) {
					continue
				}
				recheck(until)
			}
			if !found || outranks(r, rule) {
				rule, found = r, true
			}
		}
		if !found {
			continue
		}
		k := reasonKey{s.Check, s.Code}
		if prev, ok := active[k]; ok && !rule.Effect.Stronger(prev.Effect) {
			continue
		}
		active[k] = Reason{
			Check: s.Check, Code: s.Code, Count: s.Count, FirstSeen: s.FirstSeen, LastSeen: s.LastSeen,
			Effect: rule.Effect, Detail: s.Detail, Description: rule.Description,
		}
	}
	for _, prev := range in.Previous {
		k := reasonKey{prev.Check, prev.Code}
		if _, ok := active[k]; ok || prev.Check == CheckManual {
			continue
		}
		gone := now
		if prev.GoneSince != nil {
			gone = *prev.GoneSince
		}
		if !now.Before(gone.Add(clean)) {
			continue
		}
		prev.GoneSince = &gone
		active[k] = prev
		recheck(gone.Add(clean))
	}
	for _, r := range active {
		res.Reasons = append(res.Reasons, r)
	}
	if m := in.Manual; m != nil {
		res.Reasons = append(res.Reasons, Reason{
			Check: CheckManual, FirstSeen: m.At, LastSeen: m.At, Effect: EffectQuarantineGPU,
			Detail: m.Reason, Description: "quarantined by an operator",
		})
	}
	slices.SortFunc(res.Reasons, func(a, b Reason) int {
		if a.Effect != b.Effect {
			if a.Effect.Stronger(b.Effect) {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(a.Check, b.Check), cmp.Compare(a.Code, b.Code))
	})
	res.Health = res.Effect().Health()
	return res
}

// acknowledged reports whether the last Clear acknowledged s.
func acknowledged(s Signal, acks []Acknowledged, clearedAt time.Time) bool {
	for _, a := range acks {
		if a.Check == s.Check && a.Code == s.Code && s.Count <= a.Count &&
			(lifetimeCounter(s.Check) || !s.FirstSeen.After(clearedAt)) {
			return true
		}
	}
	return false
}

// Acknowledge lists what a Clear at now acknowledges of signals: each, with its count.
func Acknowledge(signals []Signal) []Acknowledged {
	out := make([]Acknowledged, 0, len(signals))
	for _, s := range signals {
		out = append(out, Acknowledged{Check: s.Check, Code: s.Code, Count: max(s.Count, 1)})
	}
	return out
}
