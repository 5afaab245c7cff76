package vps

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/internal/release"
)

// TestBootInstallsFromSignedRelease runs the user data's command as cloud-init would, with its
// files written under a scratch directory and install.sh told to install under a scratch root
// (which also keeps it from running systemctl and joining): bcd is installed from the class's
// release once its signature verifies with the class's key, the token's directory is removed
// afterwards, and a release signed by another key installs nothing.
func TestBootInstallsFromSignedRelease(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" || (runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64") {
		t.Skip("releases carry linux/amd64 and linux/arm64 binaries")
	}
	if _, err := exec.LookPath("minisign"); err != nil {
		t.Fatal("minisign is not installed: install.sh verifies releases with it (scripts/setup installs it)")
	}
	pub, key, err := release.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	_, other, err := release.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	publish := func(version string, key *release.SecretKey) {
		name := release.ArtifactName("bcd", version, "linux", runtime.GOARCH)
		bin := []byte("#!/bin/sh\n[ \"$1\" = version ] && echo \"bcd " + version + " (test)\"\n")
		s := sha256.Sum256(bin)
		sums := release.FormatChecksums(map[string]string{name: hex.EncodeToString(s[:])})
		sig, err := release.Sign(key, sums, release.TrustedComment(version))
		if err != nil {
			t.Fatal(err)
		}
		files["/"+version+"/SHA256SUMS"], files["/"+version+"/SHA256SUMS.minisig"], files["/"+version+"/"+name] = sums, sig, bin
	}
	publish("v1.2.3", key)
	publish("v6.6.6", other)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b, ok := files[r.URL.Path]; ok {
			_, _ = w.Write(b)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		version string
		ok      bool
	}{{"v1.2.3", true}, {"v6.6.6", false}} {
		params := testParams(t, "")
		params.Release = Release{URL: srv.URL, Version: tc.version, PublicKey: string(pub.Encode())}
		k, err := checkRelease(params.Release)
		if err != nil {
			t.Fatal(err)
		}
		ud, err := userData(params, k, testRequest(uuid.NewString(), "test.local"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := parseBoot(ud)
		if err != nil {
			t.Fatal(err)
		}
		dir, root := filepath.Join(t.TempDir(), "boot"), t.TempDir()
		moved := func(s string) string { return strings.ReplaceAll(s, bootDir, dir) }
		for path, content := range b.files {
			if err := os.MkdirAll(filepath.Dir(moved(path)), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(moved(path), content, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		args := slices.Clone(b.command)
		for i := range args {
			args[i] = moved(args[i])
		}
		cmd := exec.Command(args[0], append(args[1:], "--root", root)...)
		cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		installed, _ := os.ReadFile(filepath.Join(root, "usr/local/bin/bcd"))
		_, statErr := os.Stat(dir)
		switch {
		case !os.IsNotExist(statErr):
			t.Errorf("%s: the boot directory (with the token) is still there: %v", tc.version, statErr)
		case tc.ok && (err != nil || !strings.Contains(string(installed), "bcd v1.2.3")):
			t.Errorf("%s: want bcd installed: %v\n%s", tc.version, err, out)
		case !tc.ok && (err == nil || installed != nil || !strings.Contains(string(out), "does not verify")):
			t.Errorf("%s (signed by another key): want nothing installed: %v\n%s", tc.version, err, out)
		}
	}
}
