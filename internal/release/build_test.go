package release

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestBuildIsReproducible builds a release twice into two directories and checks that the
// checksums are identical, that the CLI verifies the signature, and that the files match the
// manifest. It builds linux/amd64 only, to keep the run short; the arm64 build uses the same
// flags.
func TestBuildIsReproducible(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binaries twice")
	}
	pub, sec := newKey(t)
	keyDir := t.TempDir()
	write(t, filepath.Join(keyDir, PublicKeyFile), pub.Encode())
	var dirs [2]string
	for i := range dirs {
		dirs[i] = filepath.Join(t.TempDir(), "v1.2.3")
		m, err := Build(t.Context(), BuildOptions{Version: "v1.2.3", OutDir: dirs[i], ModuleDir: "../..", Key: sec, targets: []Target{{"linux", "amd64"}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Artifacts) != 2 || m.Artifacts[0].Name != "bcd_v1.2.3_linux_amd64" {
			t.Fatalf("manifest: %+v", m)
		}
	}
	sums := [2][]byte{readFile(t, filepath.Join(dirs[0], ChecksumsFile)), readFile(t, filepath.Join(dirs[1], ChecksumsFile))}
	if !bytes.Equal(sums[0], sums[1]) {
		t.Fatalf("two builds differ:\n%s\n%s", sums[0], sums[1])
	}
	if a, b := readFile(t, filepath.Join(dirs[0], SignatureFile)), readFile(t, filepath.Join(dirs[1], SignatureFile)); !bytes.Equal(a, b) {
		t.Error("the signatures of two builds differ")
	}

	dir := dirs[0]
	sig := readFile(t, filepath.Join(dir, SignatureFile))
	if tc, err := Verify(pub, sums[0], sig); err != nil || tc != TrustedComment("v1.2.3") {
		t.Fatalf("Verify = %q, %v", tc, err)
	}
	if cli, err := exec.LookPath("minisign"); err == nil {
		run(t, dir, cli, "-Vm", ChecksumsFile, "-p", filepath.Join(keyDir, PublicKeyFile))
	} else {
		t.Log("minisign is not installed; not checking with the CLI")
	}
	if sha, err := exec.LookPath("sha256sum"); err == nil {
		run(t, dir, sha, "--strict", "-c", ChecksumsFile)
	}

	// The manifest is covered by SHA256SUMS and lists every binary with its checksum and size.
	checksums, err := ParseChecksums(sums[0])
	if err != nil {
		t.Fatal(err)
	}
	manifest := readFile(t, filepath.Join(dir, ManifestFile))
	if checksums[ManifestFile] != hexSum(manifest) || len(checksums) != 3 {
		t.Errorf("SHA256SUMS does not cover manifest.json: %v", checksums)
	}
	m, err := ParseManifest(manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range m.Artifacts {
		fi, err := os.Stat(filepath.Join(dir, a.Name))
		if err != nil || fi.Size() != a.Size || checksums[a.Name] != a.SHA256 {
			t.Errorf("%s: %v, size %v, sums %s", a.Name, err, a.Size, checksums[a.Name])
		}
	}
	a, ok := m.Find("bcd", "linux", "amd64")
	if !ok {
		t.Fatal("no bcd for linux/amd64 in the manifest")
	}
	if runtime.GOOS == "linux" && runtime.GOARCH == "amd64" {
		out, err := exec.Command(filepath.Join(dir, a.Name), "version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "bcd v1.2.3 ") {
			t.Errorf("bcd version: %v %s", err, out)
		}
	}

	// A second build never writes into a release.
	if _, err := Build(t.Context(), BuildOptions{Version: "v1.2.3", OutDir: dir, ModuleDir: "../..", Key: sec, targets: []Target{{"linux", "amd64"}}}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("build into a full directory: %v", err)
	}
}

func TestBuildRefusesBadInput(t *testing.T) {
	t.Parallel()
	_, sec := newKey(t)
	for _, tc := range []struct {
		name string
		opts BuildOptions
		want string
	}{
		{"version with a slash", BuildOptions{Version: "v1/../x", OutDir: t.TempDir(), ModuleDir: "../..", Key: sec}, "version"},
		{"version with an underscore", BuildOptions{Version: "v1_2", OutDir: t.TempDir(), ModuleDir: "../..", Key: sec}, "version"},
		{"no key", BuildOptions{Version: "v1", OutDir: t.TempDir(), ModuleDir: "../.."}, "no signing key"},
		{"not the module", BuildOptions{Version: "v1", OutDir: t.TempDir(), ModuleDir: t.TempDir(), Key: sec}, "checkout"},
	} {
		if _, err := Build(t.Context(), tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", tc.name, err, tc.want)
		}
	}
}

func TestManifestValidation(t *testing.T) {
	t.Parallel()
	good := Manifest{Version: "v1", Artifacts: []Artifact{{Name: "bcd_v1_linux_amd64", Program: "bcd", OS: "linux", Arch: "amd64", SHA256: strings.Repeat("a", 64), Size: 1}}}
	b, err := good.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if m, err := ParseManifest(append(bytes.TrimSuffix(b, []byte("}\n")), []byte(`, "future": 1}`)...)); err != nil || m.Artifacts[0] != good.Artifacts[0] {
		t.Fatalf("ParseManifest with an unknown field = %+v, %v", m, err)
	}
	for name, change := range map[string]func(*Manifest){
		"name":      func(m *Manifest) { m.Artifacts[0].Name = "../bcd" },
		"sha256":    func(m *Manifest) { m.Artifacts[0].SHA256 = "ABC" },
		"size":      func(m *Manifest) { m.Artifacts[0].Size = 0 },
		"version":   func(m *Manifest) { m.Version = "" },
		"duplicate": func(m *Manifest) { m.Artifacts = append(m.Artifacts, m.Artifacts[0]) },
		"none":      func(m *Manifest) { m.Artifacts = nil },
	} {
		m := good
		m.Artifacts = append([]Artifact(nil), good.Artifacts...)
		change(&m)
		if err := m.Validate(); err == nil {
			t.Errorf("%s: a bad manifest is valid", name)
		}
	}
	if _, err := ParseManifest(bytes.Repeat([]byte(" "), maxManifestBytes+1)); err == nil {
		t.Error("a huge manifest parsed")
	}
	if _, err := ParseChecksums([]byte("abc  x\n")); err == nil {
		t.Error("a bad SHA256SUMS line parsed")
	}
}
