package repocheck

import (
	"os/exec"
	"slices"
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

// TestSDKDependencies: the Go SDK's module (client/go.mod), its tests included, links only the
// standard library, itself, the generated code and the few modules that speak Connect,
// protobuf and WebSockets — no PostgreSQL driver, NATS, cloud SDK or package of the control
// plane's module — so an SDK user pulls none of them.
func TestSDKDependencies(t *testing.T) {
	t.Parallel()
	allowed := []string{
		module + "/client", module + "/gen/go", "connectrpc.com/connect", "google.golang.org/protobuf",
		"google.golang.org/genproto/googleapis/rpc", "github.com/coder/websocket",
	}
	cmd := exec.Command("go", "list", "-deps", "-test", "-f", "{{if .Module}}{{.Module.Path}}{{end}}", "./...")
	cmd.Dir = "../../client"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps -test ./... in client: %v\n%s", err, out)
	}
	seen := map[string]bool{}
	for mod := range strings.FieldsSeq(string(out)) {
		seen[mod] = true
	}
	if !seen[module+"/client"] || !seen[module+"/gen/go"] {
		t.Fatalf("go list named neither the SDK nor the generated code: %q", out)
	}
	for mod := range seen {
		if !slices.Contains(allowed, mod) {
			t.Errorf("the SDK's module links %s", mod)
		}
	}
}
