package gpuhealth_test

import (
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/gpuhealth"
)

// ignore79 is a pool's override that ignores Xid 79 (a pool of GPUs known to log it spuriously).
var ignore79 = []gpuhealth.Rule{{Check: gpuhealth.CheckXid, Codes: []int64{79}, Effect: gpuhealth.EffectIgnore}}

func TestPoliciesOverrideWeakensForOnePool(t *testing.T) {
	t.Parallel()
	base := gpuhealth.DefaultPolicy()
	one := gpuhealth.Combine(base, ignore79)
	in := gpuhealth.Input{Signals: []gpuhealth.Signal{xid(79, t0)}}
	if r := one.Evaluate(in, t0); r.Health != gpuhealth.Healthy || len(r.Reasons) != 0 {
		t.Fatalf("Xid 79 under a pool that ignores it: %+v", r)
	}
	if r, ok := one.Match(gpuhealth.CheckXid, 79, 1); !ok || r.Effect != gpuhealth.EffectIgnore {
		t.Fatalf("Match Xid 79: %+v %v", r, ok)
	}
	// What the override does not name is the default's.
	if r := one.Evaluate(gpuhealth.Input{Signals: []gpuhealth.Signal{xid(48, t0)}}, t0); r.Health != gpuhealth.Unhealthy {
		t.Fatalf("Xid 48 under the override: %+v", r)
	}
	// No pool: the default.
	if r := gpuhealth.Combine(base).Evaluate(in, t0); r.Health != gpuhealth.Unhealthy {
		t.Fatalf("Xid 79 in no pool: %+v", r)
	}
	// A pool without rules: the default.
	if r := gpuhealth.Combine(base, nil).Evaluate(in, t0); r.Health != gpuhealth.Unhealthy {
		t.Fatalf("Xid 79 in a pool without an override: %+v", r)
	}
}

func TestPoliciesStrongestAcrossPools(t *testing.T) {
	t.Parallel()
	base := gpuhealth.DefaultPolicy()
	strict := []gpuhealth.Rule{
		{Check: gpuhealth.CheckThermalSlowdown, Effect: gpuhealth.EffectQuarantineGPU, Description: "strict"},
		{Check: gpuhealth.CheckXid, Codes: []int64{94}, Effect: gpuhealth.EffectDegrade, Description: "xid 94 for a day", Window: gpuhealth.Duration(24 * time.Hour)},
	}
	// In a pool that ignores Xid 79 and one that does not, Xid 79 still quarantines, whatever the
	// order of the pools.
	for _, p := range []gpuhealth.Policies{gpuhealth.Combine(base, ignore79, strict), gpuhealth.Combine(base, strict, ignore79)} {
		r := p.Evaluate(gpuhealth.Input{Signals: []gpuhealth.Signal{xid(79, t0)}}, t0)
		if r.Health != gpuhealth.Unhealthy || len(r.Reasons) != 1 || r.Reasons[0].Effect != gpuhealth.EffectQuarantineGPU {
			t.Fatalf("Xid 79 in two pools, one ignoring it: %+v", r)
		}
		// A thermal slowdown takes the strict pool's quarantine over the default's degrade.
		sig := gpuhealth.Signal{Check: gpuhealth.CheckThermalSlowdown, Count: 1, FirstSeen: t0, LastSeen: t0}
		r = p.Evaluate(gpuhealth.Input{Signals: []gpuhealth.Signal{sig}}, t0)
		if r.Health != gpuhealth.Unhealthy || r.Reasons[0].Description != "strict" {
			t.Fatalf("thermal slowdown in two pools, one strict: %+v", r)
		}
		if m, _ := p.Match(gpuhealth.CheckThermalSlowdown, 0, 1); m.Effect != gpuhealth.EffectQuarantineGPU {
			t.Fatalf("Match thermal slowdown: %+v", m)
		}
		// Xid 94 degrades under both; the longer window keeps it: two hours on, the default's
		// hour is over and the strict pool's day is not.
		old := xid(94, t0)
		r = p.Evaluate(gpuhealth.Input{Signals: []gpuhealth.Signal{old}}, t0.Add(2*time.Hour))
		if r.Health != gpuhealth.Degraded || r.Reasons[0].Description != "xid 94 for a day" || !r.Recheck.Equal(t0.Add(24*time.Hour)) {
			t.Fatalf("Xid 94 two hours old in two pools: %+v", r)
		}
		if m, _ := p.Match(gpuhealth.CheckXid, 94, 1); m.Window != gpuhealth.Duration(24*time.Hour) {
			t.Fatalf("Match Xid 94: %+v", m)
		}
	}
}

func TestOverrideCheckAndJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		o     gpuhealth.Override
		field string
	}{
		{gpuhealth.Override{Rules: make([]gpuhealth.Rule, gpuhealth.MaxOverrideRules+1)}, "rules"},
		{gpuhealth.Override{Rules: []gpuhealth.Rule{{Check: "nope", Effect: gpuhealth.EffectIgnore}}}, "rules[0].check"},
		{gpuhealth.Override{Rules: []gpuhealth.Rule{{Check: gpuhealth.CheckManual, Effect: gpuhealth.EffectIgnore}}}, "rules[0].check"},
		{gpuhealth.Override{Rules: []gpuhealth.Rule{ignore79[0], {Check: gpuhealth.CheckXid, Effect: "explode"}}}, "rules[1].effect"},
		{gpuhealth.Override{Rules: []gpuhealth.Rule{{Check: gpuhealth.CheckXid, Effect: gpuhealth.EffectIgnore, Codes: make([]int64, 65)}}}, "rules[0].codes"},
		{gpuhealth.Override{Rules: []gpuhealth.Rule{{Check: gpuhealth.CheckXid, Effect: gpuhealth.EffectIgnore, MinCount: -1}}}, "rules[0].min_count"},
		{gpuhealth.Override{Rules: []gpuhealth.Rule{{Check: gpuhealth.CheckXid, Effect: gpuhealth.EffectIgnore, Window: gpuhealth.Duration(25 * time.Hour)}}}, "rules[0].window"},
		{gpuhealth.Override{OnUnhealthyLease: "maybe"}, "on_unhealthy_lease"},
		{gpuhealth.Override{Rules: ignore79, OnUnhealthyLease: gpuhealth.LeaseEnd}, ""},
	} {
		if field, _ := tc.o.Check(); field != tc.field {
			t.Errorf("Check(%+v) names %q, want %q", tc.o, field, tc.field)
		}
	}
	o := gpuhealth.Override{Rules: []gpuhealth.Rule{{Check: gpuhealth.CheckXid, Codes: []int64{94}, MinCount: 2, Effect: gpuhealth.EffectDegrade,
		Window: gpuhealth.Duration(time.Hour)}}, OnUnhealthyLease: gpuhealth.LeaseEnd}
	b, err := gpuhealth.EncodeOverride(o)
	if err != nil {
		t.Fatal(err)
	}
	back, err := gpuhealth.DecodeOverride(b)
	if err != nil || back.OnUnhealthyLease != gpuhealth.LeaseEnd || len(back.Rules) != 1 || back.Rules[0].Window != o.Rules[0].Window ||
		back.Rules[0].MinCount != 2 || back.Rules[0].Codes[0] != 94 {
		t.Fatalf("round trip of %s: %+v, %v", b, back, err)
	}
	if b, _ := gpuhealth.EncodeOverride(gpuhealth.Override{}); string(b) != "{}" {
		t.Fatalf("the zero override encodes as %s", b)
	}
	if z, err := gpuhealth.DecodeOverride([]byte("{}")); err != nil || !z.IsZero() {
		t.Fatalf("{} decodes as %+v, %v", z, err)
	}
}
