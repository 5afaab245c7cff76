package repocheck

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/better-compute/better-compute"

// TestRoleDependencies checks what each public tree links, transitively (go list -deps), as
// Tailscale's depaware does: the roles never reach into one another (the compiler keeps them out
// of each other's internal/, this keeps them from importing each other's public packages), none
// links the module assembly, and the daemon links no role's code.
func TestRoleDependencies(t *testing.T) {
	t.Parallel()
	roles := []struct {
		pkg    string
		denied []string
	}{
		{"server", []string{module + "/workers", module + "/gateway", module + "/internal/moduleset", module + "/internal/process", "github.com/nats-io/"}},
		{"workers", []string{module + "/server", module + "/gateway", module + "/internal/moduleset", module + "/internal/process", "github.com/nats-io/"}},
		{"gateway", []string{module + "/server", module + "/workers", module + "/internal/moduleset", module + "/internal/process", "github.com/nats-io/"}},
		// bcd still links pgx through the domain packages' queries (internal/event, command,
		// enqueue, fleet import gen/db); their vocabulary moves to leaf packages with the GPU work.
		{"cmd/bcd", []string{module + "/server", module + "/workers", module + "/gateway", module + "/internal/moduleset", "github.com/aws/", "github.com/nats-io/"}},
	}
	for _, r := range roles {
		t.Run(r.pkg, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command("go", "list", "-deps", "./"+r.pkg)
			cmd.Dir = "../.."
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("go list -deps ./%s: %v\n%s", r.pkg, err, out)
			}
			for dep := range strings.FieldsSeq(string(out)) {
				for _, d := range r.denied {
					if dep == d || strings.HasPrefix(dep, strings.TrimSuffix(d, "/")+"/") {
						t.Errorf("%s links %s", r.pkg, dep)
					}
				}
			}
		})
	}
}
