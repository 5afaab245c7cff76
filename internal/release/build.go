package release

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// modulePath is the module whose binaries a release carries.
const modulePath = "github.com/better-compute/better-compute"

// versionVar is the variable -X stamps with the release version (see internal/buildinfo).
const versionVar = modulePath + "/internal/buildinfo.Version"

// Target is a platform a release is built for.
type Target struct{ OS, Arch string }

// Targets are the platforms of every release.
var Targets = []Target{{"linux", "amd64"}, {"linux", "arm64"}}

// BuildOptions says what to build and where.
type BuildOptions struct {
	// Version names the release (see ValidateVersion); it is stamped into the binaries.
	Version string
	// OutDir receives the release; it must not exist or be empty.
	OutDir string
	// ModuleDir is the checkout of the module to build (default ".").
	ModuleDir string
	// Key signs SHA256SUMS.
	Key *SecretKey
	// Go is the go command (default "go" from PATH). The same toolchain gives the same bytes.
	Go string
	// Log, when set, receives one line per step.
	Log io.Writer

	// targets replaces Targets (tests build fewer to stay fast).
	targets []Target
}

// TrustedComment is the signed comment of a release's SHA256SUMS.minisig. It names the version,
// so a verifier can refuse a valid signature of another release's checksums.
func TrustedComment(version string) string {
	return "better-compute release " + version + " file:" + ChecksumsFile
}

// Build builds a release reproducibly into opts.OutDir: each program for each target (static,
// -trimpath, no VCS stamp, no build id, so the same source and toolchain give the same bytes),
// manifest.json, SHA256SUMS over all of them (sha256sum's format, sorted by name, manifest.json
// included so its signature covers the manifest too) and SHA256SUMS.minisig. It returns the
// manifest.
func Build(ctx context.Context, opts BuildOptions) (*Manifest, error) {
	if err := ValidateVersion(opts.Version); err != nil {
		return nil, err
	}
	if opts.Key == nil {
		return nil, errors.New("release: build: no signing key")
	}
	if opts.OutDir == "" {
		return nil, errors.New("release: build: no output directory")
	}
	if opts.ModuleDir == "" {
		opts.ModuleDir = "."
	}
	if opts.Go == "" {
		opts.Go = "go"
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	targets := opts.targets
	if targets == nil {
		targets = Targets
	}
	if err := checkModule(opts.ModuleDir); err != nil {
		return nil, err
	}
	if err := emptyDir(opts.OutDir); err != nil {
		return nil, err
	}
	moduleDir, err := filepath.Abs(opts.ModuleDir)
	if err != nil {
		return nil, fmt.Errorf("release: build: %w", err)
	}
	outDir, err := filepath.Abs(opts.OutDir)
	if err != nil {
		return nil, fmt.Errorf("release: build: %w", err)
	}

	m := &Manifest{Version: opts.Version}
	for _, t := range targets {
		for _, program := range Programs {
			name := ArtifactName(program, opts.Version, t.OS, t.Arch)
			fmt.Fprintf(opts.Log, "building %s\n", name)
			path := filepath.Join(outDir, name)
			if err := goBuild(ctx, opts.Go, moduleDir, program, opts.Version, t, path); err != nil {
				return nil, err
			}
			sum, size, err := hashFile(path)
			if err != nil {
				return nil, err
			}
			m.Artifacts = append(m.Artifacts, Artifact{Name: name, Program: program, OS: t.OS, Arch: t.Arch, SHA256: sum, Size: size})
		}
	}
	manifest, err := m.Encode()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(outDir, ManifestFile), manifest, 0o644); err != nil {
		return nil, fmt.Errorf("release: write manifest: %w", err)
	}
	sums := map[string]string{ManifestFile: hexSum(manifest)}
	for _, a := range m.Artifacts {
		sums[a.Name] = a.SHA256
	}
	checksums := FormatChecksums(sums)
	if err := os.WriteFile(filepath.Join(outDir, ChecksumsFile), checksums, 0o644); err != nil {
		return nil, fmt.Errorf("release: write %s: %w", ChecksumsFile, err)
	}
	sig, err := Sign(opts.Key, checksums, TrustedComment(opts.Version))
	if err != nil {
		return nil, err
	}
	// Check before publishing that what was written verifies with the public key.
	if _, err := Verify(opts.Key.Public(), checksums, sig); err != nil {
		return nil, fmt.Errorf("release: the new signature does not verify: %w", err)
	}
	if err := os.WriteFile(filepath.Join(outDir, SignatureFile), sig, 0o644); err != nil {
		return nil, fmt.Errorf("release: write %s: %w", SignatureFile, err)
	}
	fmt.Fprintf(opts.Log, "signed %s with key %s\n", ChecksumsFile, opts.Key.ID)
	return m, nil
}

// checkModule makes sure dir is a checkout of this module, so a release is never built from
// something else by running the command in the wrong directory.
func checkModule(dir string) error {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return fmt.Errorf("release: build must run in a checkout of %s: %w", modulePath, err)
	}
	defer f.Close()
	s := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for s.Scan() {
		if line := strings.TrimSpace(s.Text()); strings.HasPrefix(line, "module ") {
			if strings.TrimSpace(strings.TrimPrefix(line, "module ")) == modulePath {
				return nil
			}
			break
		}
	}
	return fmt.Errorf("release: %s is not a checkout of %s", dir, modulePath)
}

// emptyDir creates dir, or accepts it when it exists and is empty: a release is never mixed
// with the files of another.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("release: create %s: %w", dir, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("release: %w", err)
	case len(entries) > 0:
		return fmt.Errorf("release: %s is not empty; refusing to mix releases", dir)
	}
	return nil
}

// goBuild builds one program for one target into path. Everything that could make two builds
// differ is pinned: no cgo, trimmed paths, no VCS stamp, an empty build id, default instruction
// set levels, and GOFLAGS from the caller's environment ignored.
func goBuild(ctx context.Context, goCmd, moduleDir, program, version string, t Target, path string) error {
	ldflags := "-s -w -buildid= -X " + versionVar + "=" + version
	cmd := exec.CommandContext(ctx, goCmd, "build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", path, "./cmd/"+program)
	cmd.Dir = moduleDir
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOFLAGS", "GOOS", "GOARCH", "CGO_ENABLED", "GOAMD64", "GOARM64", "GOEXPERIMENT":
			return true
		}
		return false
	}), "CGO_ENABLED=0", "GOOS="+t.OS, "GOARCH="+t.Arch, "GOAMD64=v1", "GOARM64=v8.0", "GOFLAGS=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("release: go build %s for %s/%s: %w\n%s", program, t.OS, t.Arch, err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

func hashFile(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, fmt.Errorf("release: %w", err)
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, fmt.Errorf("release: hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// FormatChecksums writes name → hex SHA-256 in sha256sum's format ("HEX  NAME", text mode),
// sorted by name, so `sha256sum -c SHA256SUMS` checks the files.
func FormatChecksums(sums map[string]string) []byte {
	var b bytes.Buffer
	for _, name := range slices.Sorted(maps.Keys(sums)) {
		fmt.Fprintf(&b, "%s  %s\n", sums[name], name)
	}
	return b.Bytes()
}

// ParseChecksums reads a SHA256SUMS file (at most 1 MiB) into name → lower-case hex SHA-256.
// Read it only after verifying its signature.
func ParseChecksums(data []byte) (map[string]string, error) {
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("release: %s is %d bytes, more than %d", ChecksumsFile, len(data), maxManifestBytes)
	}
	sums := map[string]string{}
	for i, line := range splitLines(data) {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || !hexSHA256.MatchString(sum) || name == "" || strings.ContainsAny(name, "/\\") {
			return nil, fmt.Errorf("release: %s line %d: want \"HEX  NAME\"", ChecksumsFile, i+1)
		}
		if _, dup := sums[name]; dup {
			return nil, fmt.Errorf("release: %s lists %q twice", ChecksumsFile, name)
		}
		sums[name] = sum
	}
	return sums, nil
}
