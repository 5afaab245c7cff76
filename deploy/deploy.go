// Package deploy holds what puts bcd on a host: bcd.service, the systemd unit, and install.sh,
// which installs the binary (from a local file or a URL, verified by its SHA-256) and the unit.
// Its test runs the script against a scratch root.
package deploy
