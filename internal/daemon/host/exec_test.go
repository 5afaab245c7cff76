package host_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/internal/daemon/host"
)

// TestExecSymlink checks that exec follows symlinks before the allow-list check: a listed path
// that is a symlink to an unlisted program runs nothing, while a directory symlink (/bin ->
// usr/bin) and a symlink to another listed program still run.
func TestExecSymlink(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	link := filepath.Join(dir, "tool")
	if err := os.Symlink("/usr/bin/touch", link); err != nil {
		t.Fatal(err)
	}
	_, err := policy(t, link).Exec(ctx, execPayload(t, map[string]any{"argv": []any{link, marker}}))
	if !errors.Is(err, host.ErrNotAllowed) || !strings.Contains(err.Error(), "symlink to ") {
		t.Errorf("exec through a symlink to an unlisted program: %v", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the program behind the symlink ran")
	}

	// A symlinked directory on the way is fine (merged /usr), and so is a link to a program
	// that is listed itself.
	bin := filepath.Join(dir, "bin")
	if err := os.Symlink("/usr/bin", bin); err != nil {
		t.Fatal(err)
	}
	out, err := policy(t, filepath.Join(bin, "echo")).Exec(ctx, execPayload(t, map[string]any{"argv": []any{filepath.Join(bin, "echo"), "via dir"}}))
	if err != nil || field(out, "stdout").GetStringValue() != "via dir\n" {
		t.Errorf("exec through a symlinked directory: %v, %v", out, err)
	}
	if _, err := policy(t, link, "/usr/bin/touch").Exec(ctx, execPayload(t, map[string]any{"argv": []any{link, marker}})); err != nil {
		t.Errorf("exec through a symlink to a listed program: %v", err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Error("the listed program behind the symlink did not run")
	}

	// A program others may rewrite is refused.
	script := filepath.Join(dir, "script.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(script, 0o775); err != nil {
		t.Fatal(err)
	}
	if _, err := policy(t, script).Exec(ctx, execPayload(t, map[string]any{"argv": []any{script}})); !errors.Is(err, host.ErrNotAllowed) || !strings.Contains(err.Error(), "writable") {
		t.Errorf("exec of a group-writable program: %v", err)
	}
}

// TestExecEnv checks that a command cannot set what makes a program load other code, nor
// PATH, and that what it may set is passed alone with the fixed PATH.
func TestExecEnv(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	p := policy(t, "/usr/bin/env")
	for _, env := range []map[string]any{
		{"LD_PRELOAD": "/tmp/x.so"},
		{"LD_LIBRARY_PATH": "/tmp"},
		{"BASH_ENV": "/tmp/x"},
		{"ENV": "/tmp/x"},
		{"PATH": "/tmp"},
		{"PYTHONPATH": "/tmp"},
		{"GREETING": "hi"},
		{"LANG": "/tmp/evil-locale"},
		{"LC_ALL": "../../tmp/x"},
		{"TZ": ":/tmp/zone"},
		{"LANG": "C\x00x"},
		{"LANG": strings.Repeat("a", host.MaxEnvValue+1)},
	} {
		out, err := p.Exec(ctx, execPayload(t, map[string]any{"argv": []any{"/usr/bin/env"}, "env": env}))
		if err == nil || !strings.Contains(err.Error(), "not run") || out != nil {
			t.Errorf("env %v: %v, %v", env, out, err)
		}
	}
	out, err := p.Exec(ctx, execPayload(t, map[string]any{"argv": []any{"/usr/bin/env"}, "env": map[string]any{
		"LANG": "C.UTF-8", "LC_ALL": "C", "TZ": "Europe/Paris", "NO_COLOR": "1",
	}}))
	if err != nil {
		t.Fatal(err)
	}
	want := "PATH=" + host.ExecPath + "\nLANG=C.UTF-8\nLC_ALL=C\nNO_COLOR=1\nTZ=Europe/Paris\n"
	if got := field(out, "stdout").GetStringValue(); got != want {
		t.Errorf("env printed %q, want %q", got, want)
	}
}
