package state_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/daemon/state"
)

const trustDomain = "test.local"

// ca signs node certificates the way the PKI does (SPIFFE ID in the one URI SAN).
type ca struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
	pem  []byte
}

func newCA(t *testing.T) *ca {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &ca{key: key, cert: cert, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (c *ca) issue(t *testing.T, nodeID string, key *ecdsa.PrivateKey, notAfter time.Time) []byte {
	t.Helper()
	u, _ := url.Parse("spiffe://" + trustDomain + "/node/" + nodeID)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: nodeID}, URIs: []*url.URL{u},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, c.cert, &key.PublicKey, c.key)
	if err != nil {
		t.Fatal(err)
	}
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), c.pem...)
}

func (c *ca) identity(t *testing.T, nodeID string) *daemon.Identity {
	t.Helper()
	key, err := daemon.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return &daemon.Identity{NodeID: nodeID, TrustDomain: trustDomain, Key: key, ChainPEM: c.issue(t, nodeID, key, time.Now().Add(time.Hour)), RootPEM: c.pem}
}

// joined returns a state directory holding a fresh identity.
func joined(t *testing.T) (*state.Dir, *ca, *daemon.Identity) {
	t.Helper()
	dir, err := state.New(filepath.Join(t.TempDir(), "bcd"))
	if err != nil {
		t.Fatal(err)
	}
	if err := dir.Create(); err != nil {
		t.Fatal(err)
	}
	c := newCA(t)
	id := c.identity(t, "0190a1b2-0000-7000-8000-000000000001")
	if err := dir.SaveJoin(id, state.Node{Gateway: "127.0.0.1:8443", Hostname: "h1"}); err != nil {
		t.Fatal(err)
	}
	return dir, c, id
}

func TestJoinAndLoad(t *testing.T) {
	t.Parallel()
	dir, _, id := joined(t)
	if fi, _ := os.Stat(dir.Path); fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v, want 0700", fi.Mode().Perm())
	}
	for _, f := range []string{state.KeyFile, state.ChainFile, state.RootCAFile, state.NodeFile} {
		fi, err := os.Stat(dir.File(f))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", f, fi.Mode().Perm(), err)
		}
	}
	got, n, err := dir.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got.NodeID != id.NodeID || n.NodeID != id.NodeID || n.Gateway != "127.0.0.1:8443" || n.TrustDomain != trustDomain || !got.Key.Equal(id.Key) {
		t.Errorf("loaded %+v, %+v", got, n)
	}
	if err := dir.Create(); err == nil || !strings.Contains(err.Error(), "already holds the identity") {
		t.Errorf("join into a joined directory: %v", err)
	}
}

func TestNotJoined(t *testing.T) {
	t.Parallel()
	dir, _ := state.New(filepath.Join(t.TempDir(), "none"))
	if _, _, err := dir.Load(); err == nil || !strings.Contains(err.Error(), "bcd join") {
		t.Errorf("load of a missing directory: %v", err)
	}
}

// TestTampered checks that Load refuses a state it cannot trust, naming the file.
func TestTampered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, d *state.Dir, c *ca)
		file   string
		want   string
	}{
		{"key readable by others", func(t *testing.T, d *state.Dir, _ *ca) { t.Helper(); chmod(t, d.File(state.KeyFile), 0o644) }, state.KeyFile, "permissions 0644"},
		{"chain writable by group", func(t *testing.T, d *state.Dir, _ *ca) { t.Helper(); chmod(t, d.File(state.ChainFile), 0o620) }, state.ChainFile, "permissions 0620"},
		{"directory open to others", func(t *testing.T, d *state.Dir, _ *ca) { t.Helper(); chmod(t, d.Path, 0o755) }, "", "permissions 0755"},
		{"another key", func(t *testing.T, d *state.Dir, _ *ca) {
			t.Helper()
			k, _ := daemon.NewKey()
			der, _ := x509.MarshalECPrivateKey(k)
			write(t, d.File(state.KeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
		}, state.KeyFile, "does not belong to the certificate"},
		{"not a key", func(t *testing.T, d *state.Dir, _ *ca) {
			t.Helper()
			write(t, d.File(state.KeyFile), []byte("garbage"))
		}, state.KeyFile, "not a private key"},
		{"another node's certificate", func(t *testing.T, d *state.Dir, c *ca) {
			t.Helper()
			id, _, _ := d.Load()
			write(t, d.File(state.ChainFile), c.issue(t, "0190a1b2-0000-7000-8000-000000000002", id.Key, time.Now().Add(time.Hour)))
		}, state.ChainFile, "is not node"},
		{"expired certificate", func(t *testing.T, d *state.Dir, c *ca) {
			t.Helper()
			id, _, _ := d.Load()
			write(t, d.File(state.ChainFile), c.issue(t, id.NodeID, id.Key, time.Now().Add(-time.Minute)))
		}, state.ChainFile, "expired"},
		{"missing root CA", func(t *testing.T, d *state.Dir, _ *ca) { t.Helper(); os.Remove(d.File(state.RootCAFile)) }, state.RootCAFile, "missing"},
		{"key is a symbolic link", func(t *testing.T, d *state.Dir, _ *ca) {
			t.Helper()
			other := filepath.Join(t.TempDir(), "key.pem")
			data, _ := os.ReadFile(d.File(state.KeyFile))
			write(t, other, data)
			os.Remove(d.File(state.KeyFile))
			if err := os.Symlink(other, d.File(state.KeyFile)); err != nil {
				t.Fatal(err)
			}
		}, state.KeyFile, "symbolic link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d, c, _ := joined(t)
			tc.tamper(t, d, c)
			_, _, err := d.Load()
			if err == nil {
				t.Fatal("loaded a tampered state")
			}
			path := d.Path
			if tc.file != "" {
				path = d.File(tc.file)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q; want it to name %s and say %q", err, path, tc.want)
			}
		})
	}
}

func TestSaveChain(t *testing.T) {
	t.Parallel()
	d, c, id := joined(t)
	renewed := c.issue(t, id.NodeID, id.Key, time.Now().Add(2*time.Hour))
	if err := d.SaveChain(renewed); err != nil {
		t.Fatal(err)
	}
	got, _, err := d.Load()
	if err != nil || string(got.ChainPEM) != string(renewed) {
		t.Fatalf("after renewal: %v", err)
	}
	if fi, _ := os.Stat(d.File(state.ChainFile)); fi.Mode().Perm() != 0o600 {
		t.Errorf("renewed chain mode %v", fi.Mode().Perm())
	}
	left, _ := filepath.Glob(filepath.Join(d.Path, ".*tmp*"))
	if len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestLock(t *testing.T) {
	t.Parallel()
	d, _, _ := joined(t)
	unlock, err := d.Lock()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Lock(); err == nil || !strings.Contains(err.Error(), "another bcd") {
		t.Errorf("second lock: %v", err)
	}
	unlock()
	unlock2, err := d.Lock()
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}

func TestAllowExec(t *testing.T) {
	t.Parallel()
	d, _, _ := joined(t)
	if got, err := d.AllowExec(); err != nil || got != nil {
		t.Errorf("no file: %v, %v", got, err)
	}
	write(t, d.File(state.AllowExecFile), []byte("# programs bcd may exec\n/bin/echo\n\n  /usr/bin/uname # kernel\n"))
	got, err := d.AllowExec()
	if err != nil || strings.Join(got, ",") != "/bin/echo,/usr/bin/uname" {
		t.Errorf("allow list %v, %v", got, err)
	}
	chmod(t, d.File(state.AllowExecFile), 0o644) // readable is fine
	if _, err := d.AllowExec(); err != nil {
		t.Errorf("world-readable allow list: %v", err)
	}
	chmod(t, d.File(state.AllowExecFile), 0o666)
	if _, err := d.AllowExec(); err == nil || !strings.Contains(err.Error(), state.AllowExecFile) {
		t.Errorf("world-writable allow list: %v", err)
	}
	chmod(t, d.File(state.AllowExecFile), 0o600)
	write(t, d.File(state.AllowExecFile), []byte("echo\n"))
	if _, err := d.AllowExec(); err == nil || !strings.Contains(err.Error(), "allow-exec:1") {
		t.Errorf("relative path: %v", err)
	}
}

func TestDraining(t *testing.T) {
	t.Parallel()
	d, _, _ := joined(t)
	if on, _, err := d.Draining(); on || err != nil {
		t.Fatalf("draining at first: %v %v", on, err)
	}
	if err := d.SetDraining(true); err != nil {
		t.Fatal(err)
	}
	on, since, err := d.Draining()
	if !on || err != nil || time.Since(since) > time.Minute {
		t.Fatalf("after drain: %v %v %v", on, since, err)
	}
	if err := d.SetDraining(false); err != nil {
		t.Fatal(err)
	}
	if err := d.SetDraining(false); err != nil {
		t.Fatal(err)
	}
	if on, _, _ := d.Draining(); on {
		t.Fatal("still draining after undrain")
	}
}

func TestRecord(t *testing.T) {
	t.Parallel()
	d, _, _ := joined(t)
	r := d.Record()
	c1 := &daemonv1.Command{Id: "c1", IdempotencyKey: "k1", Payload: &daemonv1.Command_Exec{Exec: &daemonv1.ExecPayload{Path: "/bin/true"}}}
	if err := r.Started("k1", c1); err != nil {
		t.Fatal(err)
	}
	if err := r.Finished("k1", &daemonv1.CommandResult{CommandId: "c1", Success: true, Error: ""}); err != nil {
		t.Fatal(err)
	}
	// k2 started but never finished: the daemon died while it ran.
	if err := r.Started("k2/with slashes", &daemonv1.Command{Id: "c2", Payload: &daemonv1.Command_Exec{Exec: &daemonv1.ExecPayload{Path: "/bin/true"}}}); err != nil {
		t.Fatal(err)
	}
	got, err := d.Record().Load(time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]daemon.Recorded{}
	for _, g := range got {
		byKey[g.Key] = g
	}
	if r1 := byKey["k1"]; r1.Result.GetCommandId() != "c1" || !r1.Result.GetSuccess() {
		t.Errorf("k1: %+v", r1)
	}
	if r2 := byKey["k2/with slashes"]; r2.Result.GetCommandId() != "c2" || r2.Result.GetSuccess() || r2.Result.GetError() != state.Interrupted {
		t.Errorf("k2 (interrupted): %+v", r2)
	}
	files, _ := os.ReadDir(d.File(state.ResultsDir))
	for _, f := range files {
		if fi, _ := f.Info(); fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v", f.Name(), fi.Mode().Perm())
		}
	}
	// Entries older than `since` are forgotten, on disk too.
	got, err = d.Record().Load(time.Now().Add(time.Minute))
	if err != nil || len(got) != 0 {
		t.Errorf("load after the memory: %v, %v", got, err)
	}
	if files, _ := os.ReadDir(d.File(state.ResultsDir)); len(files) != 0 {
		t.Errorf("%d entries left on disk", len(files))
	}
	// A record tampered with is refused, naming the file.
	if err := r.Started("k3", c1); err != nil {
		t.Fatal(err)
	}
	files, _ = os.ReadDir(d.File(state.ResultsDir))
	chmod(t, filepath.Join(d.File(state.ResultsDir), files[0].Name()), 0o666)
	if _, err := d.Record().Load(time.Now()); err == nil || !strings.Contains(err.Error(), files[0].Name()) {
		t.Errorf("world-writable record entry: %v", err)
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// write replaces a file's content, keeping its mode (0600 for a new one).
func write(t *testing.T, path string, data []byte) {
	t.Helper()
	mode := os.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		mode = fi.Mode().Perm()
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
}

// TestCreateLeavesOpenDirectories checks that join refuses a directory others can enter rather
// than changing its mode.
func TestCreateLeavesOpenDirectories(t *testing.T) {
	t.Parallel()
	open := t.TempDir()
	chmod(t, open, 0o755)
	d, _ := state.New(open)
	if err := d.Create(); err == nil || !strings.Contains(err.Error(), "permissions 0755") {
		t.Errorf("create in an open directory: %v", err)
	}
	if fi, _ := os.Stat(open); fi.Mode().Perm() != 0o755 {
		t.Errorf("the directory's mode was changed to %v", fi.Mode().Perm())
	}
	private := t.TempDir()
	chmod(t, private, 0o700)
	d, _ = state.New(private)
	if err := d.Create(); err != nil {
		t.Errorf("create in an existing private directory: %v", err)
	}
	d, _ = state.New(filepath.Join(t.TempDir(), "a", "b", "bcd"))
	if err := d.Create(); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(d.Path); fi.Mode().Perm() != 0o700 {
		t.Errorf("new directory mode %v", fi.Mode().Perm())
	}
}

// TestRecordHold: a held command that started but never finished is loaded as running, not
// interrupted, and its result, once finished, is loaded like any other.
func TestRecordHold(t *testing.T) {
	t.Parallel()
	d, _, _ := joined(t)
	r := d.Record()
	up := &daemonv1.Command{Id: "u1", IdempotencyKey: "k-up", Payload: &daemonv1.Command_Upgrade{Upgrade: &daemonv1.UpgradePayload{Version: "v2"}}}
	if err := r.Started("k-up", up); err != nil {
		t.Fatal(err)
	}
	if err := r.Started("k-other", &daemonv1.Command{Id: "c2"}); err != nil {
		t.Fatal(err)
	}
	held := d.Record()
	held.Hold("k-up")
	got, err := held.Load(time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]daemon.Recorded{}
	for _, g := range got {
		byKey[g.Key] = g
	}
	if g := byKey["k-up"]; !g.Running || g.Result != nil {
		t.Errorf("held: %+v; want running", g)
	}
	if g := byKey["k-other"]; g.Running || g.Result.GetError() != state.Interrupted {
		t.Errorf("not held: %+v; want interrupted", g)
	}
	if err := held.Finished("k-up", &daemonv1.CommandResult{CommandId: "u1", Success: true}); err != nil {
		t.Fatal(err)
	}
	got, err = held.Load(time.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range got {
		if g.Key == "k-up" && (g.Running || !g.Result.GetSuccess()) {
			t.Errorf("after Finished: %+v", g)
		}
	}
}

// TestUpgradeMarker: the marker round-trips, is private like the rest of the directory, and
// clearing it twice is not an error.
func TestUpgradeMarker(t *testing.T) {
	t.Parallel()
	d, _, _ := joined(t)
	if m, err := d.Upgrade(); m != nil || err != nil {
		t.Fatalf("no marker: %v, %v", m, err)
	}
	now := time.Now().UTC()
	want := state.Upgrade{CommandID: "u1", IdempotencyKey: "k", From: "v1", To: "v2", Binary: "/usr/local/bin/bcd",
		Deadline: now.Add(2 * time.Minute), State: state.UpgradeTrying, StartedAt: now}
	if err := d.SaveUpgrade(want); err != nil {
		t.Fatal(err)
	}
	got, err := d.Upgrade()
	if err != nil || got == nil || got.To != "v2" || !got.Deadline.Equal(want.Deadline) || got.State != state.UpgradeTrying {
		t.Fatalf("marker %+v, %v", got, err)
	}
	if fi, _ := os.Stat(d.File(state.UpgradeFile)); fi.Mode().Perm() != 0o600 {
		t.Errorf("marker mode %v", fi.Mode().Perm())
	}
	chmod(t, d.File(state.UpgradeFile), 0o644)
	if _, err := d.Upgrade(); err == nil || !strings.Contains(err.Error(), "permissions 0644") {
		t.Errorf("a marker others can read: %v", err)
	}
	write(t, d.File(state.UpgradeFile), []byte(`{"to": "v2"}`))
	chmod(t, d.File(state.UpgradeFile), 0o600)
	if _, err := d.Upgrade(); err == nil || !strings.Contains(err.Error(), "names no command") {
		t.Errorf("an incomplete marker: %v", err)
	}
	for range 2 {
		if err := d.ClearUpgrade(); err != nil {
			t.Fatal(err)
		}
	}
	if m, err := d.Upgrade(); m != nil || err != nil {
		t.Errorf("after clearing: %v, %v", m, err)
	}
}

// TestWebSocketCA: the WebSocket's CA given to join is kept 0600 for run; none is nil, and one
// that others can write is refused like every other file of the directory.
func TestWebSocketCA(t *testing.T) {
	t.Parallel()
	dir, c, _ := joined(t)
	if got, err := dir.WebSocketCA(); got != nil || err != nil {
		t.Fatalf("none kept: %q, %v", got, err)
	}
	if err := dir.SaveWebSocketCA(c.pem); err != nil {
		t.Fatal(err)
	}
	if got, err := dir.WebSocketCA(); string(got) != string(c.pem) || err != nil {
		t.Fatalf("kept: %q, %v", got, err)
	}
	if fi, _ := os.Stat(dir.File(state.WebSocketCAFile)); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode().Perm())
	}
	if err := os.Chmod(dir.File(state.WebSocketCAFile), 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := dir.WebSocketCA(); err == nil || !strings.Contains(err.Error(), "permissions") {
		t.Errorf("a file others can write: %v", err)
	}
}
