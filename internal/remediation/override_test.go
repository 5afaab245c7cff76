package remediation_test

import (
	"strings"
	"testing"

	"github.com/better-compute/better-compute/internal/remediation"
)

func TestOverride(t *testing.T) {
	t.Parallel()
	p := remediation.DefaultPolicy()
	quick := `{"rules": [{"check": "xid", "codes": [79], "ladder": "quick"}, {"check": "ecc_dbe", "ladder": "service"}],
		"ladders": {"quick": {"steps": [{"action": "drain"}, {"action": "reboot"}, {"action": "verify", "window": "1m"}, {"action": "service"}]},
		            "reset": {"steps": [{"action": "drain"}, {"action": "gpuReset"}, {"action": "verify", "window": "2m"}, {"action": "service"}]}}}`
	o, err := remediation.ParseOverride([]byte(quick), p)
	if err != nil {
		t.Fatal(err)
	}
	q := p.With(o)
	if name, l := q.LadderFor("xid", 79); name != "quick" || len(l.Steps) != 4 {
		t.Errorf("Xid 79 with the override: %q %v", name, l.Steps)
	}
	if name, _ := q.LadderFor("ecc_dbe", 0); name != "service" {
		t.Errorf("a DBE with the override: %q", name)
	}
	if name, l := q.LadderFor("xid", 48); name != "reset" || len(l.Steps) != 4 {
		t.Errorf("Xid 48 takes the replaced reset ladder: %q %v", name, l.Steps)
	}
	if name, _ := p.LadderFor("xid", 79); name != "reboot" || q.Version == p.Version {
		t.Error("With changed the policy it was called on, or kept its version")
	}
	for name, doc := range map[string]string{
		"unknown ladder": `{"rules": [{"ladder": "nope"}]}`,
		"bad ladder":     `{"ladders": {"x": {"steps": [{"action": "reboot"}, {"action": "service"}]}}}`,
		"not json":       `[`,
	} {
		if _, err := remediation.ParseOverride([]byte(doc), p); err == nil || !strings.Contains(err.Error(), "remediation override") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
