package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/daemon/host"
	"github.com/better-compute/better-compute/internal/daemon/state"
)

// execFrom reads an exec payload written as JSON, with "argv" standing for path and args.
func execFrom(m map[string]any) (*daemonv1.ExecPayload, error) {
	m = maps.Clone(m)
	if argv, ok := m["argv"].([]any); ok {
		delete(m, "argv")
		if len(argv) > 0 {
			m["path"], m["args"] = argv[0], argv[1:]
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	p := &daemonv1.ExecPayload{}
	return p, protojson.Unmarshal(b, p)
}

func execPayload(t *testing.T, m map[string]any) *daemonv1.ExecPayload {
	t.Helper()
	p, err := execFrom(m)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// cmdOf is a command carrying p.
func cmdOf(t *testing.T, id string, p proto.Message) *daemonv1.Command {
	t.Helper()
	c := &daemonv1.Command{Id: id}
	if err := command.SetPayload(c, p); err != nil {
		t.Fatal(err)
	}
	return c
}

func field(s *structpb.Struct, k string) *structpb.Value { return s.GetFields()[k] }

func policy(t *testing.T, allow ...string) host.ExecPolicy {
	t.Helper()
	p, err := host.NewExecPolicy(allow)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestExec(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	// /bin/sh is a symlink on most systems: the program it resolves to must be listed too.
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	p := policy(t, "/bin/echo", "/bin/sh", sh)
	out, err := p.Exec(ctx, execPayload(t, map[string]any{"argv": []any{"/bin/echo", "hello", "world"}}))
	if err != nil {
		t.Fatal(err)
	}
	if field(out, "stdout").GetStringValue() != "hello world\n" || field(out, "exitCode").GetNumberValue() != 0 || field(out, "stderr").GetStringValue() != "" {
		t.Errorf("echo: %v", out)
	}

	// Environment and working directory are the payload's; PATH is the fixed one.
	dir := t.TempDir()
	out, err = p.Exec(ctx, execPayload(t, map[string]any{
		"argv": []any{"/bin/sh", "-c", `echo "$LANG" "$(pwd)" "$PATH"; echo oops >&2; env | grep -c . ; exit 3`},
		"env":  map[string]any{"LANG": "hi"}, "dir": dir,
	}))
	if err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("exit 3: %v", err)
	}
	lines := strings.Split(field(out, "stdout").GetStringValue(), "\n")
	if !strings.HasPrefix(lines[0], "hi "+dir+" /usr/local/sbin:") || field(out, "stderr").GetStringValue() != "oops\n" || field(out, "exitCode").GetNumberValue() != 3 {
		t.Errorf("exit 3 result: %v", out)
	}
	// LANG and PATH, and what sh itself sets (PWD, SHLVL, _): nothing of the daemon's.
	if n, err := strconv.Atoi(strings.TrimSpace(lines[1])); err != nil || n > 5 {
		t.Errorf("the program saw %d environment variables (%v): %v", n, err, out)
	}

	// The output is capped, and says so.
	out, err = p.Exec(ctx, execPayload(t, map[string]any{"argv": []any{"/bin/sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x"}, "maxOutputBytes": 1000}))
	if err != nil || len(field(out, "stdout").GetStringValue()) != 1000 || !field(out, "stdoutTruncated").GetBoolValue() || field(out, "stderrTruncated").GetBoolValue() {
		t.Errorf("capped: %d bytes, %v, %v", len(field(out, "stdout").GetStringValue()), out.GetFields()["stdoutTruncated"], err)
	}

	// A timeout kills the program and what it started, and returns what it printed.
	start := time.Now()
	out, err = p.Exec(ctx, execPayload(t, map[string]any{"argv": []any{"/bin/sh", "-c", "echo started; sleep 30 & sleep 30"}, "timeoutSeconds": 0.3}))
	if err == nil || !strings.Contains(err.Error(), "timed out") || field(out, "stdout").GetStringValue() != "started\n" {
		t.Errorf("timeout: %v, %v", out, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the timeout took %v", d)
	}
	// So does the command's deadline.
	dctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := p.Exec(dctx, execPayload(t, map[string]any{"argv": []any{"/bin/sh", "-c", "sleep 30"}})); err == nil || !strings.Contains(err.Error(), "deadline") {
		t.Errorf("deadline: %v", err)
	}

	// Output that is not UTF-8 still makes a valid result.
	out, err = p.Exec(ctx, execPayload(t, map[string]any{"argv": []any{"/bin/sh", "-c", `printf 'a\377b'`}}))
	if err != nil || field(out, "stdout").GetStringValue() != "a\uFFFDb" {
		t.Errorf("binary output: %v, %v", out, err)
	}

	for _, bad := range []map[string]any{
		{},
		{"argv": []any{}},
		{"argv": []any{"/bin/echo", 3}},
		{"argv": []any{"/bin/echo"}, "dir": "relative"},
		{"argv": []any{"/bin/echo"}, "timeoutSeconds": -1},
		{"argv": []any{"/bin/echo"}, "maxOutputBytes": 1 << 30},
		{"argv": []any{"/bin/echo"}, "env": map[string]any{"A=B": "x"}},
		{"argv": []any{"/bin/echo"}, "stdin": "x"},
	} {
		// A payload of the wrong shape (a number in argv, an unknown field) is refused while
		// decoding; the others by Exec.
		if e, err := execFrom(bad); err == nil {
			if _, err := p.Exec(ctx, e); err == nil {
				t.Errorf("payload %v: no error", bad)
			}
		}
	}
}

// TestExecPolicy checks that a program off the allow list is refused and not run.
func TestExecPolicy(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	marker := filepath.Join(t.TempDir(), "ran")
	for _, tc := range []struct {
		allow []string
		argv0 string
	}{
		{nil, "/usr/bin/touch"},
		{[]string{"/bin/echo"}, "/usr/bin/touch"},
		{[]string{"/usr/bin/touch"}, "touch"},                 // must be the absolute path
		{[]string{"/usr/bin/touch"}, "/usr/bin/../bin/touch"}, // written the same way
		{[]string{"/usr/bin/touch"}, "/usr/bin//touch"},
	} {
		_, err := policy(t, tc.allow...).Exec(ctx, execPayload(t, map[string]any{"argv": []any{tc.argv0, marker}}))
		if !errors.Is(err, host.ErrNotAllowed) {
			t.Errorf("allow %v, run %s: %v", tc.allow, tc.argv0, err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("allow %v, run %s: the program ran", tc.allow, tc.argv0)
		}
	}
	if _, err := host.NewExecPolicy([]string{"bin/echo"}); err == nil {
		t.Error("relative allow-list entry accepted")
	}
	if _, err := policy(t, "/usr/bin/touch").Exec(ctx, execPayload(t, map[string]any{"argv": []any{"/usr/bin/touch", marker}})); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Error("the allowed program did not run")
	}
}

// memDrain is a DrainState in memory.
type memDrain struct {
	mu    sync.Mutex
	on    bool
	since time.Time
}

func (m *memDrain) Draining() (bool, time.Time, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.on, m.since, nil
}

func (m *memDrain) SetDraining(on bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if on && !m.on {
		m.since = time.Now()
	}
	m.on = on
	return nil
}

func TestDrain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := &host.Commands{
		Exec: policy(t, "/bin/echo"), Drain: &memDrain{},
		Inventory: func(context.Context) (*daemonv1.Inventory, error) {
			return &daemonv1.Inventory{Cpus: 4, MemoryBytes: 1 << 40}, nil
		},
	}
	h := c.Handlers()
	echo := cmdOf(t, "e1", execPayload(t, map[string]any{"argv": []any{"/bin/echo", "x"}}))
	if _, err := h[host.CommandExec](ctx, echo); err != nil {
		t.Fatal(err)
	}
	out, err := h[host.CommandDrain](ctx, cmdOf(t, "c", &daemonv1.DrainPayload{}))
	if err != nil || !field(out, "draining").GetBoolValue() {
		t.Fatalf("drain: %v, %v", out, err)
	}
	if _, err := h[host.CommandExec](ctx, echo); !errors.Is(err, host.ErrDraining) || !strings.HasPrefix(err.Error(), "draining") {
		t.Errorf("exec while draining: %v", err)
	}
	inv, err := h[host.CommandCollectInventory](ctx, cmdOf(t, "c", &daemonv1.CollectInventoryPayload{}))
	if err != nil || field(inv, "cpus").GetNumberValue() != 4 || field(inv, "memoryBytes").GetStringValue() != "1099511627776" {
		t.Errorf("collectInventory while draining: %v, %v", inv, err)
	}
	if _, err := h[host.CommandDrain](ctx, cmdOf(t, "c", &daemonv1.DrainPayload{})); err != nil {
		t.Errorf("drain again: %v", err)
	}
	if _, err := h[host.CommandUndrain](ctx, cmdOf(t, "c", &daemonv1.UndrainPayload{})); err != nil {
		t.Fatal(err)
	}
	if _, err := h[host.CommandExec](ctx, echo); err != nil {
		t.Errorf("exec after undrain: %v", err)
	}
}

func TestReboot(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var reboots int
	reboot := func() error { reboots++; return nil }
	cmd := cmdOf(t, "r1", &daemonv1.RebootPayload{})

	refused := &host.Commands{Reboot: reboot}
	_, err := refused.Handlers()[host.CommandReboot](ctx, cmdOf(t, "c", &daemonv1.RebootPayload{}))
	if !errors.Is(err, host.ErrRebootNotAllowed) {
		t.Errorf("reboot without --allow-reboot: %v", err)
	}
	refused.AfterResult(cmd, &daemonv1.CommandResult{CommandId: "r1", Error: err.Error()})
	refused.AfterResult(cmd, &daemonv1.CommandResult{CommandId: "r1", Success: true}) // even a forged success
	if reboots != 0 {
		t.Fatal("rebooted without --allow-reboot")
	}

	allowed := &host.Commands{AllowReboot: true, Reboot: reboot}
	out, err := allowed.Handlers()[host.CommandReboot](ctx, cmdOf(t, "c", &daemonv1.RebootPayload{}))
	if err != nil || !field(out, "rebooting").GetBoolValue() {
		t.Fatalf("reboot: %v, %v", out, err)
	}
	if reboots != 0 {
		t.Fatal("rebooted before the result was recorded")
	}
	allowed.AfterResult(cmd, &daemonv1.CommandResult{CommandId: "r1", Success: true, Result: out})
	allowed.AfterResult(cmd, &daemonv1.CommandResult{CommandId: "r1", Success: true, Result: out})
	if reboots != 1 {
		t.Errorf("%d reboots, want 1", reboots)
	}
}

// TestConfigure: configure writes the config to the state directory, as sorted JSON, reports
// its checksum and whether it changed, and runs while the node drains (it only records).
func TestConfigure(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := t.TempDir()
	if err := os.Chmod(path, 0o700); err != nil {
		t.Fatal(err)
	}
	dir, err := state.New(path)
	if err != nil {
		t.Fatal(err)
	}
	drain := &memDrain{}
	if err := drain.SetDraining(true); err != nil {
		t.Fatal(err)
	}
	h := (&host.Commands{Config: dir, Drain: drain}).Handlers()[host.CommandConfigure]
	cfg, err := structpb.NewStruct(map[string]any{"b": 1, "a": map[string]any{"x": "y"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := h(ctx, cmdOf(t, "c1", &daemonv1.ConfigurePayload{Config: cfg}))
	if err != nil || !field(out, "changed").GetBoolValue() || len(field(out, "sha256").GetStringValue()) != 64 {
		t.Fatalf("configure: %v, %v", out, err)
	}
	got, err := dir.Config()
	if err != nil || string(got) != "{\n  \"a\": {\n    \"x\": \"y\"\n  },\n  \"b\": 1\n}\n" {
		t.Errorf("config.json = %q, %v", got, err)
	}
	again, err := h(ctx, cmdOf(t, "c2", &daemonv1.ConfigurePayload{Config: cfg}))
	if err != nil || field(again, "changed").GetBoolValue() || field(again, "sha256").GetStringValue() != field(out, "sha256").GetStringValue() {
		t.Errorf("configure again: %v, %v", again, err)
	}
	if _, err := h(ctx, cmdOf(t, "c3", &daemonv1.ConfigurePayload{})); err == nil {
		t.Error("configure without a config succeeded")
	}
	if _, err := (&host.Commands{}).Handlers()[host.CommandConfigure](ctx, cmdOf(t, "c4", &daemonv1.ConfigurePayload{Config: cfg})); err == nil {
		t.Error("configure without a state directory succeeded")
	}
}
