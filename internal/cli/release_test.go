package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/internal/release"
)

func TestReleaseKeygen(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "keys")
	stdout, stderr, code := runMain(t, "release", "keygen", "--out", dir)
	if code != 0 {
		t.Fatalf("keygen: %d %s", code, stderr)
	}
	secPath, pubPath := filepath.Join(dir, "minisign.key"), filepath.Join(dir, "minisign.pub")
	secData, err := os.ReadFile(secPath)
	if err != nil {
		t.Fatal(err)
	}
	sec, err := release.ParseSecretKey(secData)
	if err != nil {
		t.Fatal(err)
	}
	pubData, err := os.ReadFile(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := release.ParsePublicKey(pubData)
	if err != nil || pub.String() != sec.Public().String() {
		t.Fatalf("the public key does not match the secret key: %v", err)
	}
	for path, want := range map[string]os.FileMode{secPath: 0o600, pubPath: 0o644, dir: 0o700} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, want mode %v", path, err, want)
		}
	}
	secLine := strings.Split(string(secData), "\n")[1]
	if !strings.Contains(stdout, pub.String()) || strings.Contains(stdout+stderr, secLine[40:80]) {
		t.Errorf("keygen printed:\n%s%s", stdout, stderr)
	}

	// keygen never overwrites a key, and leaves the existing one as it was.
	if _, stderr, code := runMain(t, "release", "keygen", "--out", dir); code == 0 || !strings.Contains(stderr, "refusing to overwrite") {
		t.Errorf("second keygen: %d %s", code, stderr)
	}
	if again, _ := os.ReadFile(secPath); string(again) != string(secData) {
		t.Error("the secret key changed")
	}
	if minisign, err := exec.LookPath("minisign"); err == nil {
		// The CLI can sign with the key keygen made, and Go verifies it.
		msg := filepath.Join(t.TempDir(), "m")
		if err := os.WriteFile(msg, []byte("hello"), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(minisign, "-S", "-W", "-s", secPath, "-m", msg, "-t", "tc").CombinedOutput(); err != nil {
			t.Fatalf("minisign -S: %v %s", err, out)
		}
		sig, _ := os.ReadFile(msg + ".minisig")
		if _, err := release.Verify(pub, []byte("hello"), sig); err != nil {
			t.Error(err)
		}
	}
}

func TestReleaseBuildRefusesBadInput(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "out")
	_, stderr, code := runMain(t, "release", "build", "v1", "--out", out)
	if code == 0 || !strings.Contains(stderr, "BETTER_COMPUTE_RELEASE_KEY") {
		t.Errorf("build without a key: %d %s", code, stderr)
	}
	// A bad key in the environment is named, never shown.
	cmd := exec.Command(os.Args[0], "release", "build", "v1", "--out", out)
	cmd.Env = append(os.Environ(), "BETTER_COMPUTE_RUN_MAIN=1", "BETTER_COMPUTE_RELEASE_KEY=c2VjcmV0LXZhbHVlLXRoYXQtaXMtbm90LWEta2V5")
	b, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(b), "signing key in BETTER_COMPUTE_RELEASE_KEY") || strings.Contains(string(b), "c2VjcmV0") {
		t.Errorf("build with a bad key: %v %s", err, b)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a failed build left its output directory")
	}
}
