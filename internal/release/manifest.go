package release

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// File names inside a release directory.
const (
	ManifestFile     = "manifest.json"
	ChecksumsFile    = "SHA256SUMS"
	SignatureFile    = "SHA256SUMS.minisig"
	PublicKeyFile    = "minisign.pub"
	SecretKeyFile    = "minisign.key"
	maxManifestBytes = 1 << 20
	maxArtifacts     = 256
)

// Programs are the binaries a release carries.
var Programs = []string{"bcd", "better-compute"}

// versionPattern is what a release version may look like: it becomes part of file names and URLs,
// so no slashes, no underscores (the separator of artifact names) and no spaces.
var versionPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+-]{0,63}$`)

var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ValidateVersion reports whether v can name a release (for example v1.2.3 or v1.2.3-rc.1).
func ValidateVersion(v string) error {
	if !versionPattern.MatchString(v) {
		return fmt.Errorf("release: version %q: want letters, digits, '.', '+' and '-' (at most 64, e.g. v1.2.3)", v)
	}
	return nil
}

// ArtifactName is the file name of a program's binary in a release: PROGRAM_VERSION_OS_ARCH,
// e.g. bcd_v1.2.3_linux_amd64. install.sh and bcd build the same name.
func ArtifactName(program, version, goos, goarch string) string {
	return program + "_" + version + "_" + goos + "_" + goarch
}

// Manifest describes a release: what the control plane reads to offer versions and what bcd reads
// to find its artifact. It is covered by SHA256SUMS, whose signature is what makes it trusted:
// read it only after verifying SHA256SUMS.minisig and the manifest's own checksum.
type Manifest struct {
	// Version is the release version, as passed to the release build.
	Version string `json:"version"`
	// Artifacts are the binaries, sorted by name.
	Artifacts []Artifact `json:"artifacts"`
}

// Artifact is one binary of a release.
type Artifact struct {
	// Name is the file name in the release directory (see ArtifactName).
	Name string `json:"name"`
	// Program is bcd or better-compute.
	Program string `json:"program"`
	// OS and Arch are Go's GOOS and GOARCH.
	OS   string `json:"os"`
	Arch string `json:"arch"`
	// SHA256 is the lower-case hex SHA-256 of the file, the same as in SHA256SUMS.
	SHA256 string `json:"sha256"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
}

// Find returns the artifact of program for goos/goarch, or false.
func (m *Manifest) Find(program, goos, goarch string) (Artifact, bool) {
	for _, a := range m.Artifacts {
		if a.Program == program && a.OS == goos && a.Arch == goarch {
			return a, true
		}
	}
	return Artifact{}, false
}

// Validate checks that the manifest is well formed: a valid version, and artifacts with
// consistent names, hex checksums and sizes, with no name twice.
func (m *Manifest) Validate() error {
	if err := ValidateVersion(m.Version); err != nil {
		return err
	}
	if len(m.Artifacts) == 0 || len(m.Artifacts) > maxArtifacts {
		return fmt.Errorf("release: manifest has %d artifacts, want 1 to %d", len(m.Artifacts), maxArtifacts)
	}
	seen := map[string]bool{}
	for _, a := range m.Artifacts {
		if a.Name != ArtifactName(a.Program, m.Version, a.OS, a.Arch) || strings.ContainsAny(a.Program+a.OS+a.Arch, "_/\\ ") || a.Program == "" || a.OS == "" || a.Arch == "" {
			return fmt.Errorf("release: manifest artifact %q: the name must be PROGRAM_VERSION_OS_ARCH of its fields", a.Name)
		}
		if !hexSHA256.MatchString(a.SHA256) {
			return fmt.Errorf("release: manifest artifact %q: sha256 must be 64 lower-case hex digits", a.Name)
		}
		if a.Size <= 0 {
			return fmt.Errorf("release: manifest artifact %q: size %d", a.Name, a.Size)
		}
		if seen[a.Name] {
			return fmt.Errorf("release: manifest lists %q twice", a.Name)
		}
		seen[a.Name] = true
	}
	return nil
}

// Encode is the manifest as indented JSON with artifacts sorted by name: the same manifest
// always gives the same bytes.
func (m *Manifest) Encode() ([]byte, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	c := *m
	c.Artifacts = slices.Clone(m.Artifacts)
	slices.SortFunc(c.Artifacts, func(a, b Artifact) int { return strings.Compare(a.Name, b.Name) })
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("release: encode manifest: %w", err)
	}
	return append(b, '\n'), nil
}

// ParseManifest reads and validates a manifest.json of at most 1 MiB. Unknown fields are ignored,
// so a reader keeps working when later releases add fields.
func ParseManifest(data []byte) (*Manifest, error) {
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("release: manifest is %d bytes, more than %d", len(data), maxManifestBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("release: parse manifest: %w", err)
	}
	if dec.More() {
		return nil, errors.New("release: parse manifest: data after the JSON object")
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return &m, nil
}
