package remediation_test

import (
	"strings"
	"testing"

	"github.com/better-compute/better-compute/internal/remediation"
)

func TestDefaultPolicy(t *testing.T) {
	t.Parallel()
	p := remediation.DefaultPolicy()
	for _, tc := range []struct {
		check  string
		code   int64
		ladder string
	}{
		{"xid", 79, "reboot"}, {"xid", 48, "reset"}, {"ecc_dbe", 0, "reset"}, {"row_remap_pending", 0, "reset"},
		{"row_remap_failure", 0, "service"}, {"xid", 64, "service"}, {"gpu_missing", 0, "reboot"},
		{"driver_not_answering", 0, "reboot"}, {"recovery_action", 2, "reboot"}, {"recovery_action", 1, "reset"},
		{"xid", 999, "reboot"}, {"thermal_slowdown", 0, "reboot"},
	} {
		if name, l := p.LadderFor(tc.check, tc.code); name != tc.ladder || len(l.Steps) == 0 {
			t.Errorf("%s %d: ladder %q, want %q", tc.check, tc.code, name, tc.ladder)
		}
	}
}

func TestRungs(t *testing.T) {
	t.Parallel()
	_, l := remediation.DefaultPolicy().LadderFor("xid", 48) // drain, gpuReset, diagnose, verify, reboot, diagnose, verify, service
	s := l.Steps
	if got := remediation.NextRung(s, 1); got != 4 || s[got].Action != remediation.ActionReboot {
		t.Errorf("after a failed gpuReset: step %d", got)
	}
	if got := remediation.NextRung(s, 5); got != 7 || s[got].Action != remediation.ActionService {
		t.Errorf("after a failed second diagnose: step %d", got)
	}
	if remediation.RungPassed(s, 2) || !remediation.RungPassed(s, 3) || remediation.RungPassed(s, 1) {
		t.Error("only the verify closing a rung passes it")
	}
}

func TestParsePolicyRefuses(t *testing.T) {
	t.Parallel()
	for name, doc := range map[string]string{
		"no version":     `{"ladders": {}, "rules": [{"ladder": "x"}], "repeat": {"count": 3, "within": "1h"}}`,
		"unknown ladder": `{"version": "1", "ladders": {}, "rules": [{"ladder": "x"}], "repeat": {"count": 3, "within": "1h"}}`,
		"no catch-all":   `{"version": "1", "ladders": {"s": {"steps": [{"action": "drain"}, {"action": "service"}]}}, "rules": [{"check": "xid", "ladder": "s"}], "repeat": {"count": 3, "within": "1h"}}`,
		"no drain first": `{"version": "1", "ladders": {"s": {"steps": [{"action": "reboot"}, {"action": "service"}]}}, "rules": [{"ladder": "s"}], "repeat": {"count": 3, "within": "1h"}}`,
		"no service":     `{"version": "1", "ladders": {"s": {"steps": [{"action": "drain"}, {"action": "reboot"}]}}, "rules": [{"ladder": "s"}], "repeat": {"count": 3, "within": "1h"}}`,
		"bad level":      `{"version": "1", "ladders": {"s": {"steps": [{"action": "drain"}, {"action": "diagnose", "level": 7}, {"action": "service"}]}}, "rules": [{"ladder": "s"}], "repeat": {"count": 3, "within": "1h"}}`,
		"no window":      `{"version": "1", "ladders": {"s": {"steps": [{"action": "drain"}, {"action": "verify"}, {"action": "service"}]}}, "rules": [{"ladder": "s"}], "repeat": {"count": 3, "within": "1h"}}`,
		"unknown action": `{"version": "1", "ladders": {"s": {"steps": [{"action": "drain"}, {"action": "pray"}, {"action": "service"}]}}, "rules": [{"ladder": "s"}], "repeat": {"count": 3, "within": "1h"}}`,
		"no repeat":      `{"version": "1", "ladders": {"s": {"steps": [{"action": "drain"}, {"action": "service"}]}}, "rules": [{"ladder": "s"}]}`,
	} {
		if _, err := remediation.ParsePolicy([]byte(doc)); err == nil || !strings.Contains(err.Error(), "remediation policy") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
