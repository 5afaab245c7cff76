package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/dbtest"
)

// serveProc is `serve` running as a subprocess.
type serveProc struct {
	URL string // the API's base URL
	cmd *exec.Cmd
	log []string
}

// startServe runs this binary's `serve --roles api` on the database at dbURL with args, and
// returns once the API listens.
func startServe(t *testing.T, dbURL string, args ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"serve", "--roles", "api", "--host", "127.0.0.1", "--port", "0"}, args...)...)
	cmd.Env = append(os.Environ(), "BETTER_COMPUTE_RUN_MAIN=1",
		"BETTER_COMPUTE_DATABASE_URL="+dbURL, "BETTER_COMPUTE_SECRET=serve-test-secret-0123456789abcdef-xyz")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProc{cmd: cmd}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stderr)
	for p.URL == "" && lines.Scan() {
		p.log = append(p.log, lines.Text())
		var rec struct{ Msg, URL string }
		if json.Unmarshal(lines.Bytes(), &rec) == nil && rec.Msg == "api listening" {
			p.URL = rec.URL
		}
	}
	if p.URL == "" {
		t.Fatalf("serve did not start:\n%s", strings.Join(p.log, "\n"))
	}
	go func() {
		for lines.Scan() { // keep the pipe drained
		}
	}()
	return p
}

// stop ends serve with SIGTERM and waits for it.
func (p *serveProc) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
}

// post calls a route of the API as JSON with key.
func (p *serveProc) post(t *testing.T, route, key string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.URL+route, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Better-Compute", "1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "better-compute.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestModuleEnabledLater: without the events module its route answers 404 and its migrations
// are not applied; enabled later, its migration is applied once and its route answers.
func TestModuleEnabledLater(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.EmptyURL(t)
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	tableExists := func() bool {
		var ok bool
		if err := pool.QueryRow(context.Background(), `SELECT to_regclass('events_nats_status') IS NOT NULL`).Scan(&ok); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	applied := func() int {
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM module_migrations WHERE module = 'events'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	plain := startServe(t, dbURL)
	key, err := auth.MintAdminKey(context.Background(), pool, "modules-test")
	if err != nil {
		t.Fatal(err)
	}
	if code := plain.post(t, "/eventStream/status", key.String()); code != http.StatusNotFound {
		t.Errorf("eventStream/status without the module: %d, want 404", code)
	}
	if tableExists() || applied() != 0 {
		t.Error("the events module's migrations were applied although it is not enabled")
	}
	plain.stop(t)

	cfg := writeFile(t, "modules:\n  - name: events\n    config:\n      url: nats://127.0.0.1:4222\n")
	for range 2 {
		with := startServe(t, dbURL, "--config", cfg)
		if code := with.post(t, "/eventStream/status", key.String()); code != http.StatusOK {
			t.Errorf("eventStream/status with the module: %d, want 200", code)
		}
		with.stop(t)
	}
	if !tableExists() || applied() != 1 {
		t.Errorf("enabled twice: table %t, %d migrations recorded; want the one migration applied once", tableExists(), applied())
	}
}

// TestMisconfiguredModuleStopsServe: a bad key in a module's section stops serve, naming it.
func TestMisconfiguredModuleStopsServe(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct{ yaml, want string }{
		"unknown key":    {"modules:\n  - name: events\n    config: {url: 'nats://127.0.0.1:4222', bogus: 1}\n", "modules[0].config.bogus: unknown key"},
		"missing url":    {"modules:\n  - name: events\n    config: {stream: S}\n", "modules[0].config.url"},
		"unknown module": {"modules: [billing]\n", `modules[0]: this binary has no module "billing"`},
	} {
		// dev runs what serve would, with the same checks; without a secret in the file or the
		// environment it keeps its random one, so the module is what stops it.
		for _, command := range []string{"serve", "dev"} {
			t.Run(command+"/"+name, func(t *testing.T) {
				t.Parallel()
				cfg := writeFile(t, tc.yaml)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				args := []string{command, "--config", cfg, "--roles", "api", "--port", "0"}
				env := []string{"BETTER_COMPUTE_RUN_MAIN=1", "BETTER_COMPUTE_DATABASE_URL=postgres://nobody@127.0.0.1:1/none"}
				if command == "dev" {
					args = append(args, "--data-dir", t.TempDir())
				} else {
					env = append(env, "BETTER_COMPUTE_SECRET=serve-test-secret-0123456789abcdef-xyz")
				}
				cmd := exec.CommandContext(ctx, os.Args[0], args...)
				// An unreachable database: the configuration must stop the command before it is used.
				cmd.Env = append(withoutSecret(os.Environ()), env...)
				out, err := cmd.CombinedOutput()
				if err == nil || !strings.Contains(string(out), tc.want) {
					t.Errorf("%s: %v: %s; want it stopped naming %q", command, err, out, tc.want)
				}
			})
		}
	}
}

// withoutSecret is environ without a deployment secret the test's own environment may hold.
func withoutSecret(environ []string) []string {
	return slices.DeleteFunc(slices.Clone(environ), func(kv string) bool {
		return strings.HasPrefix(kv, "BETTER_COMPUTE_SECRET=")
	})
}

// TestDoctorNamesAModuleWhoseServerIsDown: doctor --strict fails, naming the events module's
// check, when its NATS server cannot be reached.
func TestDoctorNamesAModuleWhoseServerIsDown(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.URL(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now
	cfg := writeFile(t, "secret: serve-test-secret-0123456789abcdef-xyz\nmodules:\n  - name: events\n    config:\n      url: nats://"+dead+"\n")
	stdout, stderr, code := runMain(t, "doctor", "--config", cfg, "--database-url", dbURL, "--strict", "--json")
	if code == 0 {
		t.Fatalf("doctor --strict passed with the NATS server down:\n%s", stdout)
	}
	var findings []struct{ Check, Severity, Cause string }
	if err := json.Unmarshal([]byte(stdout), &findings); err != nil {
		t.Fatalf("%v: %s %s", err, stdout, stderr)
	}
	found := false
	for _, f := range findings {
		if f.Check == "module.events.reachable" {
			found = f.Severity == "error" && strings.Contains(f.Cause, dead)
		}
	}
	if !found {
		t.Errorf("no module.events.reachable error naming %s in %s", dead, stdout)
	}
}
