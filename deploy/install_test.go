package deploy_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/better-compute/better-compute/internal/release"
)

// fakeBcd is a stand-in for a bcd release: its "version" command answers like bcd's.
func fakeBcd(version string) []byte {
	return []byte("#!/bin/sh\n[ \"$1\" = version ] && echo \"bcd " + version + " (test)\"\n")
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func writeFile(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "bcd")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// install runs install.sh under a scratch root (which never touches the real system) and
// returns its output and whether it succeeded.
func install(t *testing.T, root string, args ...string) (string, bool) {
	t.Helper()
	return installEnv(t, nil, root, args...)
}

// installEnv is install with extra environment variables.
func installEnv(t *testing.T, env []string, root string, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command("./install.sh", append([]string{"--root", root}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) {
			t.Fatal(err)
		}
	}
	return string(out), err == nil
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestInstallFromFile(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	v1 := fakeBcd("v1.0.0")
	out, ok := install(t, root, "--binary", writeFile(t, v1), "--sha256", strings.ToUpper(sum(v1)))
	if !ok {
		t.Fatalf("install: %s", out)
	}
	bin := filepath.Join(root, "usr/local/bin/bcd")
	if got, _ := os.ReadFile(bin); string(got) != string(v1) || mode(t, bin) != 0o755 {
		t.Errorf("binary not installed: mode %v", mode(t, bin))
	}
	unit := filepath.Join(root, "etc/systemd/system/bcd.service")
	data, err := os.ReadFile(unit)
	if err != nil || mode(t, unit) != 0o644 || !strings.Contains(string(data), "ExecStart=/usr/local/bin/bcd run") || !strings.Contains(string(data), "Restart=always") {
		t.Errorf("unit: %v, %v\n%s", mode(t, unit), err, data)
	}
	if m := mode(t, filepath.Join(root, "var/lib/bcd")); m != 0o700 {
		t.Errorf("state directory mode %v", m)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/default/bcd")); err != nil {
		t.Error(err)
	}

	// Without a checksum a local file is still checked to be bcd and to run.
	v2 := fakeBcd("v2.0.0")
	if out, ok := install(t, root, "--binary", writeFile(t, v2)); !ok || !strings.Contains(out, "bcd v2.0.0") {
		t.Fatalf("upgrade from a file: %s", out)
	}
	// A wrong checksum, or something that is not bcd, installs nothing.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--binary", writeFile(t, v1), "--sha256", sum(v2)}, "checksum mismatch"},
		{[]string{"--binary", writeFile(t, []byte("#!/bin/sh\necho hello\n"))}, "not bcd"},
		{[]string{"--binary", writeFile(t, []byte("#!/bin/sh\nexit 1\n"))}, "does not run"},
		{[]string{"--binary", writeFile(t, v1), "--sha256", "abc"}, "64 hex digits"},
		{[]string{"--binary", filepath.Join(t.TempDir(), "missing")}, "no file"},
	} {
		out, ok := install(t, root, tc.args...)
		if ok || !strings.Contains(out, tc.want) {
			t.Errorf("%v: ok=%v %s; want %q", tc.args, ok, out, tc.want)
		}
		if got, _ := os.ReadFile(bin); string(got) != string(v2) {
			t.Fatalf("%v: the installed binary changed", tc.args)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(root, "usr/local/bin/.*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestInstallFromURL(t *testing.T) {
	t.Parallel()
	v1 := fakeBcd("v1.0.0")
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/bcd-v1" {
			http.NotFound(w, r)
			return
		}
		w.Write(v1)
	}))
	defer srv.Close()
	root := t.TempDir()
	bin := filepath.Join(root, "opt/bc/bin/bcd")

	if out, ok := install(t, root, "--url", srv.URL+"/bcd-v1"); ok || !strings.Contains(out, "needs --sha256") || hits.Load() != 0 {
		t.Errorf("URL without a checksum: ok=%v, %d downloads: %s", ok, hits.Load(), out)
	}
	if out, ok := install(t, root, "--url", srv.URL+"/bcd-v1", "--sha256", sum([]byte("other"))); ok || !strings.Contains(out, "checksum mismatch") {
		t.Errorf("URL with the wrong checksum: ok=%v %s", ok, out)
	}
	if out, ok := install(t, root, "--url", srv.URL+"/missing", "--sha256", sum(v1)); ok || !strings.Contains(out, "download") {
		t.Errorf("404: ok=%v %s", ok, out)
	}
	if _, err := os.Stat(bin); err == nil {
		t.Fatal("installed after a failure")
	}
	out, ok := install(t, root, "--url", srv.URL+"/bcd-v1", "--sha256", sum(v1), "--prefix", "/opt/bc")
	if !ok {
		t.Fatalf("install from URL: %s", out)
	}
	if got, _ := os.ReadFile(bin); string(got) != string(v1) {
		t.Error("binary not installed")
	}
	unit, _ := os.ReadFile(filepath.Join(root, "etc/systemd/system/bcd.service"))
	if !strings.Contains(string(unit), "ExecStart=/opt/bc/bin/bcd run") {
		t.Errorf("unit for prefix /opt/bc:\n%s", unit)
	}
	if out, ok := install(t, root, "--url", "ftp://example.com/bcd", "--sha256", sum(v1)); ok || !strings.Contains(out, "http(s)") {
		t.Errorf("ftp URL: %s", out)
	}
}

// TestUnit checks the unit with systemd's own verifier, when it is installed.
func TestUnit(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	unit, err := os.ReadFile("bcd.service")
	if err != nil {
		t.Fatal(err)
	}
	// verify checks that ExecStart's program exists: point it at one that does.
	bin := writeFile(t, fakeBcd("v1"))
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bcd.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/bcd", bin)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(analyze, "verify", path).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestExamplesAllowNoRootShell checks that the allow lists the unit and the installed
// /etc/default/bcd show as examples name no program that runs other programs for its caller
// (exec runs as root): no systemctl, shell, interpreter or env.
func TestExamplesAllowNoRootShell(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if out, ok := install(t, root, "--binary", writeFile(t, fakeBcd("v1.0.0"))); !ok {
		t.Fatalf("install: %s", out)
	}
	for _, path := range []string{"bcd.service", filepath.Join(root, "etc/default/bcd")} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for line := range strings.SplitSeq(string(data), "\n") {
			_, rest, ok := strings.Cut(line, "--allow-exec ")
			if !ok {
				continue
			}
			seen++
			list, _, _ := strings.Cut(rest, " ")
			for prog := range strings.SplitSeq(strings.Trim(list, `"`), ",") {
				switch filepath.Base(prog) {
				case "systemctl", "sh", "bash", "dash", "env", "python3", "perl", "sudo", "su", "busybox":
					t.Errorf("%s: the example allow list has %s: %s", path, prog, line)
				}
			}
		}
		if seen == 0 {
			t.Errorf("%s: no example --allow-exec", path)
		}
	}
}

// releaseServer serves release directories from memory and counts requests per path.
type releaseServer struct {
	mu    sync.Mutex
	files map[string][]byte
	hits  map[string]int
}

func (s *releaseServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hits[r.URL.Path]++
	b, ok := s.files[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Write(b)
}

func (s *releaseServer) hitsOf(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// addRelease publishes a release of a fake bcd under /VERSION/ the way `better-compute release
// build` lays it out, letting the caller spoil it: change the signed checksums, the signature or
// the binary served.
func (s *releaseServer) addRelease(t *testing.T, key *release.SecretKey, version, comment string, spoil func(sums, sig, bin []byte) ([]byte, []byte, []byte)) string {
	t.Helper()
	name := release.ArtifactName("bcd", version, "linux", runtime.GOARCH)
	bin := fakeBcd(version)
	sums := release.FormatChecksums(map[string]string{name: sum(bin), "manifest.json": sum([]byte("{}"))})
	sig, err := release.Sign(key, sums, comment)
	if err != nil {
		t.Fatal(err)
	}
	if spoil != nil {
		sums, sig, bin = spoil(sums, sig, bin)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files["/"+version+"/SHA256SUMS"] = sums
	s.files["/"+version+"/SHA256SUMS.minisig"] = sig
	s.files["/"+version+"/"+name] = bin
	return "/" + version + "/" + name
}

func TestInstallFromSignedRelease(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skip("releases carry linux/amd64 and linux/arm64 binaries")
	}
	if _, err := exec.LookPath("minisign"); err != nil {
		t.Skip("minisign is not installed (scripts/setup installs it)")
	}
	pub, key, err := release.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := release.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	pubFile := filepath.Join(t.TempDir(), "minisign.pub")
	if err := os.WriteFile(pubFile, pub.Encode(), 0o644); err != nil {
		t.Fatal(err)
	}
	rs := &releaseServer{files: map[string][]byte{}, hits: map[string]int{}}
	srv := httptest.NewServer(rs)
	defer srv.Close()
	rel := func(v string) string { return release.TrustedComment(v) }
	rs.addRelease(t, key, "v1.0.0", rel("v1.0.0"), nil)
	rs.addRelease(t, key, "v2.0.0", rel("v2.0.0"), nil)
	// A signature that was changed after signing.
	badSig := rs.addRelease(t, key, "v1.0.1", rel("v1.0.1"), func(sums, sig, bin []byte) ([]byte, []byte, []byte) {
		return append(sums, "0000000000000000000000000000000000000000000000000000000000000000  extra\n"...), sig, bin
	})
	// A binary that is not the one the signed SHA256SUMS names.
	rs.addRelease(t, key, "v1.0.2", rel("v1.0.2"), func(sums, sig, _ []byte) ([]byte, []byte, []byte) {
		return sums, sig, fakeBcd("v6.6.6")
	})
	// Signed by another key; and a genuine signature of another release's checksums.
	otherSig := rs.addRelease(t, otherKey, "v1.0.3", rel("v1.0.3"), nil)
	rs.addRelease(t, key, "v1.0.4", rel("v1.0.0"), nil)

	root := t.TempDir()
	bin := filepath.Join(root, "usr/local/bin/bcd")
	base := srv.URL + "/"
	scratch := t.TempDir() // install.sh's TMPDIR, to check that it cleans up
	install := func(t *testing.T, root string, args ...string) (string, bool) {
		t.Helper()
		return installEnv(t, []string{"TMPDIR=" + scratch}, root, args...)
	}
	out, ok := install(t, root, "--release-url", base, "--version", "v1.0.0", "--pubkey", pubFile)
	if !ok || !strings.Contains(out, "Verified the signature") {
		t.Fatalf("install from a release: %s", out)
	}
	if got, _ := os.ReadFile(bin); string(got) != string(fakeBcd("v1.0.0")) {
		t.Fatal("binary not installed")
	}
	// The key can also be given as its base64 line.
	// The node upgrades itself from the same release URL, verified with the same key.
	if got, _ := os.ReadFile(filepath.Join(root, "etc/bcd/release.pub")); string(got) != string(pub.Encode()) {
		t.Errorf("etc/bcd/release.pub = %q", got)
	}
	dropIn := filepath.Join(root, "etc/systemd/system/bcd.service.d/release.conf")
	want := "ExecStart=\nExecStart=/usr/local/bin/bcd run --release-url " + srv.URL + " --release-key /etc/bcd/release.pub $BCD_ARGS\n"
	if got, _ := os.ReadFile(dropIn); !strings.Contains(string(got), want) {
		t.Errorf("%s:\n%s\nwant it to hold:\n%s", dropIn, got, want)
	}
	if out, ok := install(t, root, "--release-url", srv.URL, "--version", "v2.0.0", "--pubkey", pub.String()); !ok || !strings.Contains(out, "bcd v2.0.0") {
		t.Fatalf("upgrade with a base64 key: %s", out)
	}
	if got, _ := os.ReadFile(filepath.Join(root, "etc/bcd/release.pub")); !strings.HasSuffix(string(got), "\n"+pub.String()+"\n") {
		t.Errorf("etc/bcd/release.pub from a base64 key = %q", got)
	} else if k, err := release.ParsePublicKey(got); err != nil || k.ID != pub.ID {
		t.Errorf("etc/bcd/release.pub from a base64 key: %v, %v", k, err)
	}

	noMinisign := t.TempDir() // a PATH with what install.sh needs before it looks for minisign
	for _, tool := range []string{"dirname", "grep"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(noMinisign, tool)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"tampered signature", nil, []string{"--version", "v1.0.1", "--pubkey", pubFile}, "does not verify"},
		{"wrong checksum", nil, []string{"--version", "v1.0.2", "--pubkey", pubFile}, "checksum mismatch"},
		{"another key", nil, []string{"--version", "v1.0.3", "--pubkey", pubFile}, "does not verify"},
		{"another release's signature", nil, []string{"--version", "v1.0.4", "--pubkey", pubFile}, "signed for another release"},
		{"missing release", nil, []string{"--version", "v9.9.9", "--pubkey", pubFile}, "download"},
		{"no key", nil, []string{"--version", "v1.0.0"}, "needs --pubkey"},
		{"bad key", nil, []string{"--version", "v1.0.0", "--pubkey", "not-a-key"}, "neither a file nor"},
		{"no version", nil, []string{"--pubkey", pubFile}, "needs --version"},
		{"bad version", nil, []string{"--version", "../v1", "--pubkey", pubFile}, "not a release version"},
		{"a URL the unit cannot carry", nil, []string{"--version", "v1.0.0", "--pubkey", pubFile, "--release-url", srv.URL + "/a b"}, "cannot carry"},
		{"with --sha256", nil, []string{"--version", "v1.0.0", "--pubkey", pubFile, "--sha256", sum([]byte("x"))}, "not both"},
		{"no minisign", []string{"PATH=" + noMinisign}, []string{"--version", "v1.0.0", "--pubkey", pubFile}, "minisign is not installed"},
	} {
		out, ok := installEnv(t, append([]string{"TMPDIR=" + scratch}, tc.env...), root, append([]string{"--release-url", base}, tc.args...)...)
		if ok || !strings.Contains(out, tc.want) {
			t.Errorf("%s: ok=%v %s; want %q", tc.name, ok, out, tc.want)
		}
		if got, _ := os.ReadFile(bin); string(got) != string(fakeBcd("v2.0.0")) {
			t.Fatalf("%s: the installed binary changed", tc.name)
		}
	}
	// Nothing is downloaded beyond the checksums until their signature verifies.
	for _, p := range []string{badSig, otherSig} {
		if n := rs.hitsOf(p); n != 0 {
			t.Errorf("%s downloaded %d times despite a bad signature", p, n)
		}
	}
	if out, ok := install(t, root, "--version", "v1.0.0"); ok || !strings.Contains(out, "go with --release-url") {
		t.Errorf("--version without --release-url: %s", out)
	}
	left, _ := filepath.Glob(filepath.Join(root, "usr/local/bin/.*"))
	if more, _ := filepath.Glob(filepath.Join(scratch, "*")); len(left)+len(more) > 0 {
		t.Errorf("temporary files left: %v %v", left, more)
	}
}

// TestInstallJoinTrust: install.sh joins only with the root's pin (--ca-cert-hash, repeatable)
// or --ca-file, as bcd join does, checks a pin's form and that the CA files exist before it
// installs anything, and takes --websocket-ca-file (which it once had no option for, so a node
// behind a private-CA load balancer could not be installed in one run).
func TestInstallJoinTrust(t *testing.T) {
	t.Parallel()
	v1 := fakeBcd("v1.0.0")
	pin := "sha256:" + strings.Repeat("0a", 32)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--token", "bcj_x_y", "--gateway", "gw:443"}, "--token needs --ca-cert-hash"},
		{[]string{"--token", "bcj_x_y", "--gateway", "gw:443", "--ca-cert-hash", "0a0a"}, "--ca-cert-hash 0a0a: want sha256:<64 hex digits>"},
		{[]string{"--token", "bcj_x_y", "--gateway", "gw:443", "--ca-cert-hash", pin, "--websocket-ca-file", filepath.Join(t.TempDir(), "none.pem")}, "--websocket-ca-file"},
		{[]string{"--token", "bcj_x_y", "--gateway", "gw:443", "--ca-file", filepath.Join(t.TempDir(), "none.pem")}, "--ca-file"},
	} {
		root := t.TempDir()
		out, ok := install(t, root, append([]string{"--binary", writeFile(t, v1)}, tc.args...)...)
		if ok || !strings.Contains(out, tc.want) {
			t.Errorf("%v: ok=%v %s; want %q", tc.args, ok, out, tc.want)
		}
		if _, err := os.Stat(filepath.Join(root, "usr/local/bin/bcd")); err == nil {
			t.Errorf("%v: installed the binary all the same", tc.args)
		}
	}
	ca := writeFile(t, []byte("-----BEGIN CERTIFICATE-----\n"))
	out, ok := install(t, t.TempDir(), "--binary", writeFile(t, v1), "--token", "bcj_x_y", "--gateway", "gw:443",
		"--ca-cert-hash", pin, "--ca-cert-hash", strings.ToUpper(pin[7:9])+pin[9:], "--websocket-ca-file", ca)
	if ok || !strings.Contains(out, "want sha256:") {
		t.Errorf("a second pin without sha256: ok=%v %s", ok, out)
	}
	out, ok = install(t, t.TempDir(), "--binary", writeFile(t, v1), "--token", "bcj_x_y", "--gateway", "gw:443",
		"--ca-cert-hash", pin, "--ca-cert-hash", "sha256:"+strings.ToUpper(pin[7:]), "--websocket-ca-file", ca, "--transport", "websocket")
	if !ok {
		t.Errorf("pins and a WebSocket CA: %s", out)
	}
	if help, _ := install(t, t.TempDir(), "--help"); !strings.Contains(help, "--ca-cert-hash") || !strings.Contains(help, "--websocket-ca-file") {
		t.Errorf("--help:\n%s", help)
	}
}
