package vps

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/better-compute/better-compute/deploy"
	"github.com/better-compute/better-compute/internal/provision"
	"github.com/better-compute/better-compute/internal/release"
)

// maxUserData is EC2's limit on user data, before base64.
const maxUserData = 16 << 10

// Where the user data puts what install.sh needs. /run is a tmpfs: nothing of it, the join token
// least of all, outlives the first boot.
const (
	bootDir     = "/run/bcd-provision"
	installPath = bootDir + "/install.sh"
	unitPath    = bootDir + "/bcd.service"
	keyPath     = bootDir + "/release.pub"
	caPath      = bootDir + "/root-ca.pem"
	tokenPath   = bootDir + "/join-token"
)

// joinScript runs install.sh with the arguments after it, the join token from its file in the
// environment (not on a command line), and removes the files afterwards whatever happened.
const joinScript = `set -u; trap 'rm -rf ` + bootDir + `' EXIT; BCD_JOIN_TOKEN=$(cat ` + tokenPath + `) sh ` + installPath + ` "$@"`

// cloudConfig is the part of cloud-init's #cloud-config that the user data uses.
type cloudConfig struct {
	Hostname         string      `yaml:"hostname,omitempty"`
	PreserveHostname bool        `yaml:"preserve_hostname"`
	Packages         []string    `yaml:"packages"`
	WriteFiles       []writeFile `yaml:"write_files"`
	RunCmd           [][]string  `yaml:"runcmd"`
}

type writeFile struct {
	Path        string `yaml:"path"`
	Permissions string `yaml:"permissions"`
	Owner       string `yaml:"owner,omitempty"`
	Encoding    string `yaml:"encoding,omitempty"`
	Content     string `yaml:"content"`
}

// userData is the cloud-config that installs bcd from the class's signed release with
// deploy/install.sh (which verifies the release's signature with key, then its checksum) and
// joins with the machine's single-use token through the gateway, pinning the deployment's root
// CA. Every value is encoded by the YAML encoder and passed to the script as an argument, never
// spliced into shell text.
func userData(p Params, key *release.PublicKey, req provision.CreateRequest) ([]byte, error) {
	script, err := gzipBase64(deploy.InstallScript)
	if err != nil {
		return nil, err
	}
	unit, err := gzipBase64(deploy.Unit)
	if err != nil {
		return nil, err
	}
	cfg := cloudConfig{
		Hostname: req.Name,
		Packages: []string{"curl", "minisign"},
		WriteFiles: []writeFile{
			{Path: installPath, Permissions: "0700", Owner: "root:root", Encoding: "gz+b64", Content: script},
			{Path: unitPath, Permissions: "0644", Owner: "root:root", Encoding: "gz+b64", Content: unit},
			{Path: keyPath, Permissions: "0644", Owner: "root:root", Content: string(key.Encode())},
			{Path: caPath, Permissions: "0644", Owner: "root:root", Content: string(req.Join.RootCA)},
			{Path: tokenPath, Permissions: "0600", Owner: "root:root", Content: req.Join.Token},
		},
		RunCmd: [][]string{{
			"sh", "-c", joinScript, "install.sh",
			"--release-url", p.Release.URL, "--version", p.Release.Version, "--pubkey", keyPath,
			"--unit", unitPath, "--gateway", req.Join.Gateway, "--ca-file", caPath,
		}},
	}
	var buf bytes.Buffer
	buf.WriteString("#cloud-config\n")
	enc := yaml.NewEncoder(&buf)
	if err := enc.Encode(cfg); err != nil {
		return nil, fmt.Errorf("ec2: encode the user data: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("ec2: encode the user data: %w", err)
	}
	if buf.Len() > maxUserData {
		return nil, fmt.Errorf("ec2: the user data is %d bytes, more than EC2's %d", buf.Len(), maxUserData)
	}
	return buf.Bytes(), nil
}

// gzipBase64 is cloud-init's gz+b64 encoding: install.sh in base64 alone would not fit EC2's 16
// KiB of user data.
func gzipBase64(b []byte) (string, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return "", fmt.Errorf("ec2: compress the user data: %w", err)
	}
	if _, err := zw.Write(b); err != nil {
		return "", fmt.Errorf("ec2: compress the user data: %w", err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("ec2: compress the user data: %w", err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}
