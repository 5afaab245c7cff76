package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/modules/standard"
	"github.com/better-compute/better-compute/internal/poll"
)

// TestMain lets a test run this binary's main, as a subprocess, to check exit codes and output.
func TestMain(m *testing.M) {
	if os.Getenv("BETTER_COMPUTE_RUN_MAIN") == "1" {
		Main(standard.Modules())
		os.Exit(0)
	}
	dbtest.Main(m)
}

func runMain(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "BETTER_COMPUTE_RUN_MAIN=1", "BETTER_COMPUTE_DATABASE_URL=")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func TestMigrateBadURLPrintsOneLine(t *testing.T) {
	t.Parallel()
	for name, url := range map[string]string{
		"unreachable": "postgres://nobody:secret-pw@127.0.0.1:1/nothing?connect_timeout=5",
		"malformed":   "postgres://nobody:secret-pw@[::1/x",
		"missing":     "",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, stderr, code := runMain(t, "migrate", "--database-url", url)
			if code == 0 {
				t.Fatal("exit code 0")
			}
			if lines := strings.Count(strings.TrimSpace(stderr), "\n") + 1; lines != 1 || stderr == "" {
				t.Errorf("stderr has %d lines, want 1:\n%s", lines, stderr)
			}
			if strings.Contains(stderr, "secret-pw") {
				t.Errorf("stderr shows the password: %s", stderr)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	stdout, _, code := runMain(t, "version")
	if code != 0 || !strings.HasPrefix(stdout, "better-compute ") {
		t.Fatalf("version: %d %q", code, stdout)
	}
}

// TestServeStopsCleanlyOnSIGTERM starts `serve` on a real database, calls it, sends SIGTERM and
// expects it to drain and exit 0.
func TestServeStopsCleanlyOnSIGTERM(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(os.Args[0], "serve", "--roles", "api", "--host", "127.0.0.1", "--port", "0")
	cmd.Env = append(os.Environ(), "BETTER_COMPUTE_RUN_MAIN=1",
		"BETTER_COMPUTE_DATABASE_URL="+dbtest.EmptyURL(t),
		"BETTER_COMPUTE_SECRET=serve-test-secret-0123456789abcdef-xyz")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stderr)
	var url string
	var log []string
	for url == "" && lines.Scan() {
		log = append(log, lines.Text())
		var rec struct{ Msg, URL string }
		if json.Unmarshal(lines.Bytes(), &rec) == nil && rec.Msg == "api listening" {
			url = rec.URL
		}
	}
	if url == "" {
		t.Fatalf("serve did not start:\n%s", strings.Join(log, "\n"))
	}
	res, err := http.Get(strings.TrimSuffix(url, "/api") + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("readyz after serve migrated: %d", res.StatusCode)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for lines.Scan() {
			log = append(log, lines.Text())
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve exited with %v:\n%s", err, strings.Join(log, "\n"))
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop within 30s of SIGTERM")
	}
	if !strings.Contains(strings.Join(log, "\n"), "draining") {
		t.Errorf("serve did not drain:\n%s", strings.Join(log, "\n"))
	}
}

// TestServeWorkerRoles runs `serve --roles controllers,scheduler,sinks,iam --no-migrate` on a
// migrated database: the process takes the shards of both sharded roles and the singleton jobs,
// and gives them all back when it stops.
func TestServeWorkerRoles(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t)
	pool, err := database.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	cmd := exec.Command(os.Args[0], "serve", "--roles", "controllers,scheduler,sinks,iam", "--no-migrate")
	cmd.Env = append(os.Environ(), "BETTER_COMPUTE_RUN_MAIN=1", "BETTER_COMPUTE_DATABASE_URL="+url,
		"BETTER_COMPUTE_SECRET=serve-test-secret-0123456789abcdef-xyz")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	held := func(prefix string) int {
		var n int
		_ = pool.QueryRow(context.Background(), "SELECT count(*) FROM locks WHERE name LIKE $1 || '%' AND expires_at > now()", prefix).Scan(&n)
		return n
	}
	poll.Until(t, 30*time.Second, "the worker roles take their leases", func() bool {
		return held("shard:controllers:") >= 256 && held("shard:scheduler:") >= 256 && held("singleton:command-sweeper") >= 1 &&
			held("singleton:iam:expire-keys") >= 1 && held("singleton:retention") >= 1
	}, poll.Every(50*time.Millisecond), poll.Report(stderr.String))
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve exited with %v:\n%s", err, stderr.String())
	}
	if n := held("shard:") + held("singleton:"); n != 0 {
		var names []string
		rows, _ := pool.Query(context.Background(), "SELECT name || ' until ' || expires_at::text FROM locks WHERE expires_at > now()")
		for rows.Next() {
			var s string
			_ = rows.Scan(&s)
			names = append(names, s)
		}
		rows.Close()
		t.Errorf("%d leases still held after a clean stop: %v\n%s", n, names, stderr.String())
	}
}
