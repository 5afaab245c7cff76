package gpuhealth_test

import (
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/gpuhealth"
)

var t0 = time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)

func xid(code int64, at time.Time) gpuhealth.Signal {
	return gpuhealth.Signal{Check: gpuhealth.CheckXid, Code: code, Count: 1, FirstSeen: at, LastSeen: at}
}

func TestDefaultPolicy(t *testing.T) {
	t.Parallel()
	p := gpuhealth.DefaultPolicy()
	for _, tc := range []struct {
		check       string
		code, count int64
		want        gpuhealth.Effect
	}{
		// Application errors never quarantine.
		{gpuhealth.CheckXid, 13, 1, gpuhealth.EffectIgnore},
		{gpuhealth.CheckXid, 31, 5, gpuhealth.EffectIgnore},
		{gpuhealth.CheckXid, 43, 1, gpuhealth.EffectIgnore},
		{gpuhealth.CheckXid, 45, 1, gpuhealth.EffectIgnore},
		{gpuhealth.CheckXid, 68, 1, gpuhealth.EffectIgnore},
		// Hardware that needs a reset does.
		{gpuhealth.CheckXid, 48, 1, gpuhealth.EffectQuarantineGPU},
		{gpuhealth.CheckXid, 79, 1, gpuhealth.EffectQuarantineGPU},
		{gpuhealth.CheckXid, 94, 1, gpuhealth.EffectDegrade},
		{gpuhealth.CheckXid, 9999, 1, gpuhealth.EffectDegrade},
		{gpuhealth.CheckRowRemapFailure, 0, 1, gpuhealth.EffectQuarantineGPU},
		{gpuhealth.CheckRecoveryAction, gpuhealth.RecoveryReset, 1, gpuhealth.EffectQuarantineGPU},
		{gpuhealth.CheckRecoveryAction, gpuhealth.RecoveryReboot, 1, gpuhealth.EffectDrainNode},
		{gpuhealth.CheckECCSingleBit, 0, 10, gpuhealth.EffectIgnore},
		{gpuhealth.CheckECCSingleBit, 0, 5000, gpuhealth.EffectDegrade},
		{gpuhealth.CheckDriverNotAnswering, 0, 1, gpuhealth.EffectQuarantineNode},
	} {
		r, ok := p.Match(tc.check, tc.code, tc.count)
		got := r.Effect
		if !ok {
			got = gpuhealth.EffectIgnore
		}
		if got != tc.want {
			t.Errorf("%s %d ×%d: %s, want %s", tc.check, tc.code, tc.count, got, tc.want)
		}
	}
	if _, ok := p.Match("a_check_from_a_newer_daemon", 0, 1); ok {
		t.Error("an unknown check matched a rule")
	}
}

func TestParsePolicyRefusesUnknownNames(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		`{"version": "v", "cleanPeriod": "1m", "rules": [{"check": "nope", "effect": "degrade"}]}`,
		`{"version": "v", "cleanPeriod": "1m", "rules": [{"check": "xid", "effect": "explode"}]}`,
		`{"version": "v", "cleanPeriod": "0s", "rules": []}`,
		`{"cleanPeriod": "1m", "rules": []}`,
		`{"version": "v", "cleanPeriod": "soon", "rules": []}`,
	} {
		if _, err := gpuhealth.ParsePolicy([]byte(bad)); err == nil {
			t.Errorf("ParsePolicy(%s) succeeded", bad)
		}
	}
}

func TestEvaluate(t *testing.T) {
	t.Parallel()
	p := gpuhealth.DefaultPolicy()
	clean := time.Duration(p.CleanPeriod)

	// Xid 79: unhealthy at once, with the policy's words.
	r := p.Evaluate(gpuhealth.Input{Signals: []gpuhealth.Signal{xid(79, t0), xid(13, t0)}}, t0)
	if r.Health != gpuhealth.Unhealthy || len(r.Reasons) != 1 || r.Reasons[0].Code != 79 || r.Reasons[0].Description == "" || !r.Recheck.IsZero() {
		t.Fatalf("Xid 79 and 13: %+v", r)
	}
	// Application Xids alone change nothing.
	if r := p.Evaluate(gpuhealth.Input{Signals: []gpuhealth.Signal{xid(13, t0), xid(43, t0)}}, t0); r.Health != gpuhealth.Healthy || len(r.Reasons) != 0 {
		t.Fatalf("application Xids: %+v", r)
	}

	// A slowdown that comes and goes keeps the GPU degraded for the clean period after it last
	// went; then the GPU is healthy again.
	slow := gpuhealth.Signal{Check: gpuhealth.CheckThermalSlowdown, Code: 91, Count: 1, FirstSeen: t0, LastSeen: t0}
	r = p.Evaluate(gpuhealth.Input{Signals: []gpuhealth.Signal{slow}}, t0)
	if r.Health != gpuhealth.Degraded {
		t.Fatalf("slowdown: %+v", r)
	}
	gone := t0.Add(time.Minute)
	r = p.Evaluate(gpuhealth.Input{Previous: r.Reasons}, gone)
	if r.Health != gpuhealth.Degraded || r.Reasons[0].GoneSince == nil || !r.Reasons[0].GoneSince.Equal(gone) || !r.Recheck.Equal(gone.Add(clean)) {
		t.Fatalf("slowdown gone: %+v", r)
	}
	r2 := p.Evaluate(gpuhealth.Input{Previous: r.Reasons}, gone.Add(clean-time.Second))
	if r2.Health != gpuhealth.Degraded || !gpuhealth.SameReasons(r.Reasons, r2.Reasons) {
		t.Fatalf("within the clean period: %+v", r2)
	}
	// It comes back within the clean period: the countdown starts again when it goes again.
	back := p.Evaluate(gpuhealth.Input{Signals: []gpuhealth.Signal{slow}, Previous: r2.Reasons}, gone.Add(clean-time.Second))
	if back.Health != gpuhealth.Degraded || back.Reasons[0].GoneSince != nil {
		t.Fatalf("came back: %+v", back)
	}
	if r := p.Evaluate(gpuhealth.Input{Previous: r.Reasons}, gone.Add(clean)); r.Health != gpuhealth.Healthy || len(r.Reasons) != 0 || !r.Recheck.IsZero() {
		t.Fatalf("after the clean period: %+v", r)
	}

	// A windowed Xid counts while recent.
	r = p.Evaluate(gpuhealth.Input{Signals: []gpuhealth.Signal{xid(94, t0)}}, t0.Add(time.Minute))
	if r.Health != gpuhealth.Degraded || !r.Recheck.Equal(t0.Add(time.Hour)) {
		t.Fatalf("recent Xid 94: %+v", r)
	}
	if r := p.Evaluate(gpuhealth.Input{Signals: []gpuhealth.Signal{xid(94, t0)}}, t0.Add(2*time.Hour)); r.Health != gpuhealth.Healthy {
		t.Fatalf("old Xid 94 with no history: %+v", r)
	}

	// An operator's quarantine holds whatever the signals say.
	m := &gpuhealth.Manual{Reason: "bad fan", At: t0}
	if r := p.Evaluate(gpuhealth.Input{Manual: m}, t0); r.Health != gpuhealth.Unhealthy || r.Reasons[0].Check != gpuhealth.CheckManual || r.Reasons[0].Detail != "bad fan" {
		t.Fatalf("manual: %+v", r)
	}

	// The strongest reason comes first; a node-wide one makes the result node-wide.
	r = p.Evaluate(gpuhealth.Input{Signals: []gpuhealth.Signal{slow, {Check: gpuhealth.CheckRecoveryAction, Code: gpuhealth.RecoveryReboot, Count: 1, FirstSeen: t0, LastSeen: t0}}}, t0)
	if r.Effect() != gpuhealth.EffectDrainNode || !r.Effect().NodeWide() || r.Reasons[0].Check != gpuhealth.CheckRecoveryAction {
		t.Fatalf("reboot and slowdown: %+v", r)
	}
}

func TestClearAcknowledges(t *testing.T) {
	t.Parallel()
	p := gpuhealth.DefaultPolicy()
	dbe := gpuhealth.Signal{Check: gpuhealth.CheckECCDoubleBit, Count: 2, FirstSeen: t0, LastSeen: t0}
	x79 := xid(79, t0)
	cleared := t0.Add(time.Hour)
	acks := gpuhealth.Acknowledge([]gpuhealth.Signal{dbe, x79})
	in := func(sigs ...gpuhealth.Signal) gpuhealth.Input {
		return gpuhealth.Input{Signals: sigs, Acknowledged: acks, ClearedAt: cleared}
	}
	// What was seen at the clear is acknowledged.
	if r := p.Evaluate(in(dbe, x79), cleared); r.Health != gpuhealth.Healthy {
		t.Fatalf("acknowledged: %+v", r)
	}
	// The daemon restarted: the lifetime ECC count is the same, first seen anew: still acknowledged.
	later := cleared.Add(time.Hour)
	restarted := dbe
	restarted.FirstSeen, restarted.LastSeen = later, later
	if r := p.Evaluate(in(restarted), later); r.Health != gpuhealth.Healthy {
		t.Fatalf("ECC count seen again after a restart: %+v", r)
	}
	// More errors, or the Xid after a reboot (first seen after the clear): unhealthy again.
	grown := restarted
	grown.Count = 3
	if r := p.Evaluate(in(grown), later); r.Health != gpuhealth.Unhealthy {
		t.Fatalf("grown ECC count: %+v", r)
	}
	if r := p.Evaluate(in(xid(79, later)), later); r.Health != gpuhealth.Unhealthy {
		t.Fatalf("a new Xid 79: %+v", r)
	}
}
