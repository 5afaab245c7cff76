// Package deploy holds what puts bcd on a host: bcd.service, the systemd unit, and install.sh,
// which installs the binary (from a local file or a URL, verified by its SHA-256) and the unit.
// Its test runs the script against a scratch root.
package deploy

import _ "embed"

// InstallScript is install.sh, for the control plane to hand to machines it provisions (in their
// user data) so that they install bcd by the same verified path as an operator would.
//
//go:embed install.sh
var InstallScript []byte

// Unit is bcd.service, install.sh's default unit, handed to provisioned machines beside it.
//
//go:embed bcd.service
var Unit []byte
