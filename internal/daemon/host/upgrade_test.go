package host_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/daemon/host"
	"github.com/better-compute/better-compute/internal/daemon/state"
	"github.com/better-compute/better-compute/internal/release"
)

// newBinary writes a stand-in for a bcd release: a script whose "version" prints version.
func newBinary(version string) []byte {
	return []byte("#!/bin/sh\nif [ \"$1\" = version ]; then echo \"bcd " + version + " (test)\"; exit 0; fi\nexit 1\n")
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// releaseServer serves releases under /bc/ as `better-compute release build` lays them out, and
// counts the requests of each path.
type releaseServer struct {
	*httptest.Server
	mu        sync.Mutex
	files     map[string][]byte
	redirects map[string]string
	hits      map[string]int
}

func newReleaseServer(t *testing.T) *releaseServer {
	t.Helper()
	rs := &releaseServer{files: map[string][]byte{}, redirects: map[string]string{}, hits: map[string]int{}}
	rs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.mu.Lock()
		rs.hits[r.URL.Path]++
		data, ok := rs.files[r.URL.Path]
		to, moved := rs.redirects[r.URL.Path]
		rs.mu.Unlock()
		switch {
		case moved:
			http.Redirect(w, r, to, http.StatusFound)
		case ok:
			w.Write(data)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(rs.Close)
	return rs
}

func (rs *releaseServer) base() string { return rs.URL + "/bc" }

// publish signs and serves release version of bin with key, the trusted comment naming
// commentVersion; spoil, when set, changes what is served after signing.
func (rs *releaseServer) publish(t *testing.T, key *release.SecretKey, version, commentVersion string, bin []byte, spoil func(sums, sig, bin []byte) ([]byte, []byte, []byte)) {
	t.Helper()
	name := release.ArtifactName("bcd", version, runtime.GOOS, runtime.GOARCH)
	sums := release.FormatChecksums(map[string]string{name: sum(bin), release.ManifestFile: sum([]byte("{}"))})
	sig, err := release.Sign(key, sums, release.TrustedComment(commentVersion))
	if err != nil {
		t.Fatal(err)
	}
	if spoil != nil {
		sums, sig, bin = spoil(sums, sig, bin)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	dir := "/bc/" + version + "/"
	rs.files[dir+release.ChecksumsFile], rs.files[dir+release.SignatureFile], rs.files[dir+name] = sums, sig, bin
}

func (rs *releaseServer) hitsOf(version string) (n int) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.hits["/bc/"+version+"/"+release.ArtifactName("bcd", version, runtime.GOOS, runtime.GOARCH)]
}

// node is an installed bcd for the upgrade tests: its binary, state directory and record, and
// the execs its upgraders made.
type node struct {
	dir    *state.Dir
	bin    string
	record *state.Record
	old    []byte

	mu    sync.Mutex
	execs []string
}

func newNode(t *testing.T) *node {
	t.Helper()
	path := t.TempDir()
	if err := os.Chmod(path, 0o700); err != nil {
		t.Fatal(err)
	}
	dir, err := state.New(path)
	if err != nil {
		t.Fatal(err)
	}
	n := &node{dir: dir, bin: filepath.Join(t.TempDir(), "bcd"), record: dir.Record(), old: newBinary("v1.0.0")}
	if err := os.WriteFile(n.bin, n.old, 0o755); err != nil {
		t.Fatal(err)
	}
	return n
}

// upgrader is the upgrader of the binary of version running on n.
func (n *node) upgrader(rs *releaseServer, version string, keys ...*release.PublicKey) *host.Upgrader {
	u := &host.Upgrader{
		Path: n.bin, Version: version, Keys: keys, State: n.dir, MaxBytes: 4096,
		Args: []string{n.bin, "run"}, Env: []string{"A=1"},
		Exec: func(path string, args, env []string) error {
			n.mu.Lock()
			defer n.mu.Unlock()
			n.execs = append(n.execs, path+" "+strings.Join(args, " ")+" "+strings.Join(env, " "))
			return nil
		},
	}
	if rs != nil {
		u.Release, _ = host.ParseReleaseSource(rs.base())
	}
	return u
}

func (n *node) execCalls() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.execs)
}

// untouched fails unless the binary is the old one, alone in its directory, nothing was
// exec'd and no upgrade is marked.
func (n *node) untouched(t *testing.T, what string) {
	t.Helper()
	if got, _ := os.ReadFile(n.bin); !bytes.Equal(got, n.old) {
		t.Fatalf("%s: the binary was replaced", what)
	}
	if entries, _ := os.ReadDir(filepath.Dir(n.bin)); len(entries) != 1 {
		t.Errorf("%s: the binary's directory holds %d files", what, len(entries))
	}
	if calls := n.execCalls(); len(calls) > 0 {
		t.Errorf("%s: exec'd %v", what, calls)
	}
	if m, err := n.dir.Upgrade(); m != nil || err != nil {
		t.Errorf("%s: upgrade marker %+v, %v", what, m, err)
	}
}

// upgradeCmd is an upgrade command to version, recorded as started, as the agent does.
func (n *node) upgradeCmd(t *testing.T, id, version string) *daemonv1.Command {
	t.Helper()
	c := cmdOf(t, id, &daemonv1.UpgradePayload{Version: version})
	c.IdempotencyKey = "key-" + id
	if err := n.record.Started(daemon.KeyOf(c), c); err != nil {
		t.Fatal(err)
	}
	return c
}

// recorded is the record's entry for key, as the agent of a new process loads it.
func (n *node) recorded(t *testing.T, key string) daemon.Recorded {
	t.Helper()
	all, err := n.record.Load(time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		if r.Key == key {
			return r
		}
	}
	t.Fatalf("no record of %s", key)
	return daemon.Recorded{}
}

// TestUpgradeVerification: an upgrade installs nothing and runs nothing unless the release's
// SHA256SUMS is signed by one of the node's keys for that very version and the binary matches
// it, and says what did not verify.
func TestUpgradeVerification(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pub, key, err := release.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	otherPub, otherKey, err := release.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	rs := newReleaseServer(t)
	rs.publish(t, key, "v2.0.0", "v2.0.0", newBinary("v2.0.0"), nil)
	rs.publish(t, otherKey, "v2.0.1", "v2.0.1", newBinary("v2.0.1"), nil)
	rs.publish(t, key, "v2.0.2", "v2.0.2", newBinary("v2.0.2"), func(sums, sig, bin []byte) ([]byte, []byte, []byte) {
		return append(sums, "0000000000000000000000000000000000000000000000000000000000000000  extra\n"...), sig, bin
	})
	rs.publish(t, key, "v2.0.3", "v2.0.0", newBinary("v2.0.3"), nil)
	rs.publish(t, key, "v2.0.4", "v2.0.4", newBinary("v2.0.4"), func(sums, sig, _ []byte) ([]byte, []byte, []byte) {
		return sums, sig, newBinary("v6.6.6")
	})
	rs.publish(t, key, "v2.0.5", "v2.0.5", append(newBinary("v2.0.5"), make([]byte, 8192)...), nil)
	rs.publish(t, key, "v2.0.6", "v2.0.6", newBinary("v9.9.9"), nil)
	rs.publish(t, key, "v2.0.7", "v2.0.7", []byte("#!/bin/sh\necho hello\n"), nil)
	rs.redirects["/bc/v2.0.8/"+release.ChecksumsFile] = "/elsewhere/v2.0.0/" + release.ChecksumsFile
	rs.redirects["/bc/v2.0.9/"+release.ChecksumsFile] = "/bc/v2.0.0/" + release.ChecksumsFile
	rs.redirects["/bc/v2.0.9/"+release.SignatureFile] = "/bc/v2.0.0/" + release.SignatureFile

	n := newNode(t)
	u := n.upgrader(rs, "v1.0.0", pub)
	for _, tc := range []struct {
		name, version, want string
		fetchesBinary       bool
	}{
		{"bad signature", "v2.0.2", "does not verify: key " + key.ID.String() + ": release: invalid signature: the message does not match", false},
		{"another key", "v2.0.1", "signed by key " + otherKey.ID.String() + ", none of this node's release keys (" + pub.ID.String() + ")", false},
		{"signed for another version", "v2.0.3", `its trusted comment is "better-compute release v2.0.0 file:SHA256SUMS", not "better-compute release v2.0.3 file:SHA256SUMS"`, false},
		{"checksum mismatch", "v2.0.4", "checksum mismatch for " + rs.base() + "/v2.0.4/bcd_v2.0.4_", true},
		{"oversized", "v2.0.5", "more than 4096 bytes", true},
		{"not found", "v3.0.0", "/bc/v3.0.0/SHA256SUMS: 404 Not Found", false},
		{"redirect outside the release URL", "v2.0.8", "redirected to " + rs.URL + "/elsewhere/v2.0.0/SHA256SUMS, outside the release URL " + rs.base(), false},
		{"reports another version", "v2.0.6", `the new binary says it is version "v9.9.9", not "v2.0.6"`, true},
		{"not bcd", "v2.0.7", `the new binary is not bcd: its version command says "hello"`, true},
		// A redirect within the release URL is followed: v2.0.9's checksums are v2.0.0's, signed for v2.0.0.
		{"redirect inside the release URL", "v2.0.9", "signed by key " + key.ID.String() + " for another release", false},
		{"invalid version", "../v2", "version", false},
	} {
		_, err := u.Upgrade(ctx, n.upgradeCmd(t, "c-"+tc.version, tc.version))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasSuffix(err.Error(), "nothing replaced") && tc.name != "invalid version" {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
		if got := rs.hitsOf(tc.version); (got > 0) != tc.fetchesBinary {
			t.Errorf("%s: the binary was fetched %d times", tc.name, got)
		}
		n.untouched(t, tc.name)
	}
	// Another key of the node's verifies.
	u.Keys = []*release.PublicKey{otherPub, pub}
	if _, err := u.Upgrade(ctx, n.upgradeCmd(t, "c-ok", "v2.0.0")); !errors.Is(err, host.ErrHandedOver) {
		t.Fatalf("upgrade with the second key: %v", err)
	}
	if calls := n.execCalls(); len(calls) != 1 || calls[0] != n.bin+host.NextSuffix+" "+n.bin+" run A=1" {
		t.Errorf("exec calls %q", calls)
	}
}

// TestUpgradeRefusals: an upgrade to the running version succeeds at once, even on a node that
// does not allow upgrades, and even while draining, which refuses exec only; another version
// is refused without --release-url, and while another is on trial.
func TestUpgradeRefusals(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	n := newNode(t)
	drain := &memDrain{}
	if err := drain.SetDraining(true); err != nil {
		t.Fatal(err)
	}
	c := &host.Commands{Upgrader: n.upgrader(nil, "v1.0.0"), Drain: drain, Exec: policy(t, "/bin/echo")}
	h := c.Handlers()
	out, err := h[host.CommandUpgrade](ctx, n.upgradeCmd(t, "same", "v1.0.0"))
	if err != nil || field(out, "version").GetStringValue() != "v1.0.0" || field(out, "previousVersion").GetStringValue() != "v1.0.0" {
		t.Errorf("upgrade to the running version: %v, %v", out, err)
	}
	if _, err := h[host.CommandUpgrade](ctx, n.upgradeCmd(t, "other", "v2.0.0")); !errors.Is(err, host.ErrUpgradeNotAllowed) {
		t.Errorf("upgrade without --release-url: %v", err)
	}
	if _, err := h[host.CommandExec](ctx, cmdOf(t, "e", execPayload(t, map[string]any{"argv": []any{"/bin/echo"}}))); !errors.Is(err, host.ErrDraining) {
		t.Errorf("exec while draining: %v", err)
	}
	if _, err := (&host.Commands{}).Handlers()[host.CommandUpgrade](ctx, n.upgradeCmd(t, "none", "v2.0.0")); !errors.Is(err, host.ErrUpgradeNotAllowed) {
		t.Errorf("upgrade without an upgrader: %v", err)
	}
	n.untouched(t, "refused")
}

// TestUpgradeCommits: the old binary stages the new one as BINARY.next and execs it with a
// "trying" marker, leaving BINARY alone; the new binary, on trial, holds the command open in the
// record (a restart does not report it interrupted), and once it holds a session renames itself
// over BINARY, reports the command succeeded and marks the upgrade done.
func TestUpgradeCommits(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pub, key, err := release.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	rs := newReleaseServer(t)
	v2 := newBinary("v2.0.0")
	rs.publish(t, key, "v2.0.0", "v2.0.0", v2, nil)
	n := newNode(t)
	c := n.upgradeCmd(t, "u1", "v2.0.0")
	if _, err := n.upgrader(rs, "v1.0.0", pub).Upgrade(ctx, c); !errors.Is(err, host.ErrHandedOver) {
		t.Fatalf("upgrade: %v", err)
	}
	next := n.bin + host.NextSuffix
	if got, _ := os.ReadFile(next); !bytes.Equal(got, v2) {
		t.Fatal("the new binary is not staged")
	}
	if fi, _ := os.Stat(next); fi.Mode().Perm() != 0o755 {
		t.Errorf("staged mode %v", fi.Mode().Perm())
	}
	if got, _ := os.ReadFile(n.bin); !bytes.Equal(got, n.old) {
		t.Fatal("the old binary was replaced before the new one held a session")
	}
	m, err := n.dir.Upgrade()
	if err != nil || m == nil || m.State != state.UpgradeTrying || m.From != "v1.0.0" || m.To != "v2.0.0" || m.CommandID != "u1" ||
		m.IdempotencyKey != "key-u1" || m.Binary != n.bin || time.Until(m.Deadline) < time.Minute {
		t.Fatalf("marker %+v, %v", m, err)
	}
	if calls := n.execCalls(); len(calls) != 1 || !strings.HasPrefix(calls[0], next+" ") {
		t.Fatalf("exec calls %q", calls)
	}

	// The new binary starts (as BINARY.next; run.go strips the suffix).
	u2 := n.upgrader(rs, "v2.0.0", pub)
	trial, err := u2.Resume(n.record)
	if err != nil || trial == nil || trial.Key() != "key-u1" {
		t.Fatalf("resume in the new binary: %v, %v", trial, err)
	}
	n.record.Hold(trial.Key())
	if r := n.recorded(t, "key-u1"); !r.Running || r.Result != nil {
		t.Errorf("the command on trial is loaded as %+v; want running", r)
	}
	if _, err := u2.Upgrade(ctx, n.upgradeCmd(t, "u2", "v3.0.0")); err == nil || !strings.Contains(err.Error(), "on trial") {
		t.Errorf("another upgrade during the trial: %v", err)
	}
	held := make(chan struct{}, 1)
	held <- struct{}{}
	var results []*daemonv1.CommandResult
	if err := trial.Watch(ctx, held, func(key string, res *daemonv1.CommandResult) {
		if key != "key-u1" {
			t.Errorf("finished %s", key)
		}
		results = append(results, res)
	}); err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || !results[0].GetSuccess() || results[0].GetCommandId() != "u1" ||
		field(results[0].GetResult(), "version").GetStringValue() != "v2.0.0" || field(results[0].GetResult(), "previousVersion").GetStringValue() != "v1.0.0" {
		t.Fatalf("results %v", results)
	}
	if got, _ := os.ReadFile(n.bin); !bytes.Equal(got, v2) {
		t.Error("the new binary did not replace the old one")
	}
	if _, err := os.Stat(next); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is left: %v", next, err)
	}
	if m, err := n.dir.Upgrade(); err != nil || m == nil || m.State != state.UpgradeDone || m.FinishedAt.IsZero() {
		t.Errorf("marker after the commit: %+v, %v", m, err)
	}
	if len(n.execCalls()) != 1 {
		t.Errorf("exec calls %q", n.execCalls())
	}
	// A restart after the commit has nothing to settle; a new upgrade may start.
	if trial, err := n.upgrader(rs, "v2.0.0", pub).Resume(n.record); trial != nil || err != nil {
		t.Errorf("resume after the commit: %v, %v", trial, err)
	}
	if out, err := u2.Upgrade(ctx, n.upgradeCmd(t, "u3", "v2.0.0")); err != nil || field(out, "version").GetStringValue() != "v2.0.0" {
		t.Errorf("upgrade to the running version after the commit: %v, %v", out, err)
	}
}

// TestUpgradeRollsBack: a new binary that holds no session by the deadline marks the upgrade
// rolled back and execs the old binary, which reports the command failed with the reason,
// removes BINARY.next and clears the marker; a new binary that exits (systemd then starts the
// old one) is reported the same way. BINARY is never replaced.
func TestUpgradeRollsBack(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pub, key, err := release.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	rs := newReleaseServer(t)
	rs.publish(t, key, "v2.0.0", "v2.0.0", newBinary("v2.0.0"), nil)
	for _, tc := range []struct {
		name string
		// newBinary runs the new binary on trial, if it gets that far.
		newBinary func(t *testing.T, n *node)
		want      string
	}{
		{"watchdog", func(t *testing.T, n *node) {
			t.Helper()
			u2 := n.upgrader(rs, "v2.0.0", pub)
			trial, err := u2.Resume(n.record)
			if err != nil || trial == nil {
				t.Fatalf("resume: %v, %v", trial, err)
			}
			start := time.Now()
			if err := trial.Watch(ctx, make(chan struct{}), func(string, *daemonv1.CommandResult) { t.Error("finished without a session") }); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d < 100*time.Millisecond {
				t.Errorf("rolled back after %v, before the deadline", d)
			}
			if m, _ := n.dir.Upgrade(); m == nil || m.State != state.UpgradeRolledBack || m.Reason != "held no session within 300ms" {
				t.Errorf("marker %+v", m)
			}
			if calls := n.execCalls(); len(calls) != 2 || calls[1] != n.bin+" "+n.bin+" run A=1" {
				t.Errorf("exec calls %q; want the old binary last", calls)
			}
		}, "upgrade to v2.0.0 failed: held no session within 300ms; v1.0.0 runs again"},
		{"new binary exits", nil, "upgrade to v2.0.0 failed: " + host.ReasonExitedOnTrial + "; v1.0.0 runs again"},
		{"deadline passed before the new binary started", func(t *testing.T, n *node) {
			t.Helper()
			m, err := n.dir.Upgrade()
			if err != nil || m == nil {
				t.Fatalf("marker %v, %v", m, err)
			}
			m.StartedAt = m.StartedAt.Add(-time.Second)
			m.Deadline = m.StartedAt.Add(300 * time.Millisecond)
			if err := n.dir.SaveUpgrade(*m); err != nil {
				t.Fatal(err)
			}
			trial, err := n.upgrader(rs, "v2.0.0", pub).Resume(n.record)
			if err != nil || trial == nil {
				t.Fatalf("resume: %v, %v", trial, err)
			}
			held := make(chan struct{}, 1)
			if err := trial.Watch(ctx, held, func(string, *daemonv1.CommandResult) { t.Error("finished after the deadline") }); err != nil {
				t.Fatal(err)
			}
		}, "held no session within 300ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			n := newNode(t)
			u1 := n.upgrader(rs, "v1.0.0", pub)
			u1.Deadline = 300 * time.Millisecond
			c := n.upgradeCmd(t, "u1", "v2.0.0")
			if _, err := u1.Upgrade(ctx, c); !errors.Is(err, host.ErrHandedOver) {
				t.Fatalf("upgrade: %v", err)
			}
			if tc.newBinary != nil {
				tc.newBinary(t, n)
			}
			// The old binary starts again.
			if trial, err := n.upgrader(rs, "v1.0.0", pub).Resume(n.record); trial != nil || err != nil {
				t.Fatalf("resume in the old binary: %v, %v", trial, err)
			}
			r := n.recorded(t, "key-u1")
			if r.Running || r.Result.GetSuccess() || r.Result.GetCommandId() != "u1" || !strings.Contains(r.Result.GetError(), tc.want) {
				t.Errorf("result %v; want failed with %q", r.Result, tc.want)
			}
			if got, _ := os.ReadFile(n.bin); !bytes.Equal(got, n.old) {
				t.Error("the old binary was replaced")
			}
			if entries, _ := os.ReadDir(filepath.Dir(n.bin)); len(entries) != 1 {
				t.Errorf("the binary's directory holds %d files", len(entries))
			}
			if m, err := n.dir.Upgrade(); m != nil || err != nil {
				t.Errorf("marker %+v, %v; want none", m, err)
			}
		})
	}
}

// TestUpgradeTrialEndsWithContext: a trial whose process stops (SIGTERM) neither commits nor
// rolls back; the marker stays "trying" for the binary that starts next.
func TestUpgradeTrialEndsWithContext(t *testing.T) {
	t.Parallel()
	pub, key, err := release.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	rs := newReleaseServer(t)
	rs.publish(t, key, "v2.0.0", "v2.0.0", newBinary("v2.0.0"), nil)
	n := newNode(t)
	if _, err := n.upgrader(rs, "v1.0.0", pub).Upgrade(t.Context(), n.upgradeCmd(t, "u1", "v2.0.0")); !errors.Is(err, host.ErrHandedOver) {
		t.Fatalf("upgrade: %v", err)
	}
	trial, err := n.upgrader(rs, "v2.0.0", pub).Resume(n.record)
	if err != nil || trial == nil {
		t.Fatalf("resume: %v, %v", trial, err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := trial.Watch(ctx, make(chan struct{}), func(string, *daemonv1.CommandResult) { t.Error("finished") }); err != nil {
		t.Fatal(err)
	}
	if m, _ := n.dir.Upgrade(); m == nil || m.State != state.UpgradeTrying {
		t.Errorf("marker %+v", m)
	}
}

// TestReleaseSource: --release-url is http(s) with plain path segments, and only URLs under it
// are fetched.
func TestReleaseSource(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"https://releases.example.com", "https://releases.example.com/bc/", "http://10.0.0.1:8080/a/b"} {
		if _, err := host.ParseReleaseSource(ok); err != nil {
			t.Errorf("ParseReleaseSource(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{
		"", "releases.example.com/bc", "ftp://releases.example.com/", "https://user:pw@releases.example.com/",
		"https://releases.example.com/bc?x=1", "https://releases.example.com/bc#f", "https://releases.example.com/a/../b",
		"https://releases.example.com//a", "https:///a", "https://releases.example.com/a%2fb/",
	} {
		if _, err := host.ParseReleaseSource(bad); err == nil || !strings.HasPrefix(err.Error(), "--release-url") {
			t.Errorf("ParseReleaseSource(%q): %v", bad, err)
		}
	}
	s, err := host.ParseReleaseSource("https://releases.example.com/bc/")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.URL("v1.2.3+build", release.ChecksumsFile); got != "https://releases.example.com/bc/v1.2.3+build/SHA256SUMS" {
		t.Errorf("URL = %s", got)
	}
}

// TestLoadReleaseKeys: --release-key takes minisign.pub files (or their base64 line), at most
// eight, no key twice, and names the file it refuses.
func TestLoadReleaseKeys(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var files []string
	for i := range host.MaxReleaseKeys + 1 {
		pub, _, err := release.GenerateKey(nil)
		if err != nil {
			t.Fatal(err)
		}
		data := pub.Encode()
		if i%2 == 1 {
			data = []byte(pub.String() + "\n")
		}
		files = append(files, write("k"+string(rune('a'+i))+".pub", data))
	}
	keys, err := host.LoadReleaseKeys(files[:host.MaxReleaseKeys])
	if err != nil || len(keys) != host.MaxReleaseKeys {
		t.Fatalf("load %d keys: %d, %v", host.MaxReleaseKeys, len(keys), err)
	}
	for _, tc := range []struct {
		files []string
		want  string
	}{
		{files, "at most 8"},
		{[]string{files[0], files[0]}, "is also in " + files[0]},
		{[]string{write("bad.pub", []byte("not a key\n"))}, "bad.pub"},
		{[]string{filepath.Join(dir, "missing.pub")}, "missing.pub"},
	} {
		if _, err := host.LoadReleaseKeys(tc.files); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadReleaseKeys(%v): %v; want %q", tc.files, err, tc.want)
		}
	}
}

// TestStatusShowsUpgrades: bcd status names the release URL, the keys and the deadline, and the
// last upgrade.
func TestStatusShowsUpgrades(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s := host.Status{
		Running: true, AllowUpgrade: true, ReleaseURL: "https://releases.example.com/bc", ReleaseKeys: []string{"ADA35C7798A552DE"},
		UpgradeDeadline: "2m0s",
		Upgrade:         &state.Upgrade{CommandID: "c1", From: "v1", To: "v2", State: state.UpgradeDone, FinishedAt: at},
	}
	var out bytes.Buffer
	s.Format(&out)
	for _, want := range []string{
		"Upgrade:      releases from https://releases.example.com/bc signed by key ADA35C7798A552DE; a new binary must hold a session within 2m0s",
		"Last upgrade: v1 to v2 (command c1): done at 2030-01-02T03:04:05Z",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("bcd status:\n%s\nwant the line %q", out.String(), want)
		}
	}
	out.Reset()
	host.Status{Running: true}.Format(&out)
	if !strings.Contains(out.String(), "Upgrade:      not allowed (no --release-url and --release-key)") {
		t.Errorf("bcd status without release flags:\n%s", out.String())
	}
}
