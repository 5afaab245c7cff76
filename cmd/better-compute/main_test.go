package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain lets a test run this binary's main, as a subprocess, to check exit codes and output.
func TestMain(m *testing.M) {
	if os.Getenv("BETTER_COMPUTE_RUN_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func runMain(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "BETTER_COMPUTE_RUN_MAIN=1", "BETTER_COMPUTE_DATABASE_URL=")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func TestMigrateBadURLPrintsOneLine(t *testing.T) {
	for name, url := range map[string]string{
		"unreachable": "postgres://nobody:secret-pw@127.0.0.1:1/nothing?connect_timeout=5",
		"malformed":   "postgres://nobody:secret-pw@[::1/x",
		"missing":     "",
	} {
		t.Run(name, func(t *testing.T) {
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
	stdout, _, code := runMain(t, "version")
	if code != 0 || !strings.HasPrefix(stdout, "better-compute ") {
		t.Fatalf("version: %d %q", code, stdout)
	}
}
