// Package command names the command types a node's daemon runs. It is the one list: the API
// refuses a commands/create of any other type, the reconcilers send these names, and bcd's
// handlers are registered under them, so a type cannot pass validation and then mean nothing
// (or carry bytes no one expected) further down the line.
package command

import "slices"

// Command types. A type's payload and result are described where its handler lives
// (daemon/host for bcd, daemon.Fake for the test daemon).
const (
	// Exec runs a program from the node's allow list; payload {"argv": [...]}.
	Exec = "exec"
	// CollectInventory re-reads the node's inventory and returns it.
	CollectInventory = "collectInventory"
	// Drain tells a daemon its node is draining: it takes no new work; payload {}.
	Drain = "drain"
	// Undrain tells a daemon to accept work again (after an uncordon); payload {}.
	Undrain = "undrain"
	// Upgrade asks a daemon to run another version; payload {"version", "url", "sha256"}.
	Upgrade = "upgrade"
	// Reboot reboots the host, when bcd runs with --allow-reboot.
	Reboot = "reboot"
	// Configure asks a daemon to apply a configuration; payload {"config": {...}}.
	Configure = "configure"
	// Echo returns its payload: the simulator's and the tests' round trip.
	Echo = "echo"
)

// known is every type, sorted.
var known = []string{CollectInventory, Configure, Drain, Echo, Exec, Reboot, Undrain, Upgrade}

// Known reports whether t is one of the command types above, exactly (case and all).
func Known(t string) bool {
	_, ok := slices.BinarySearch(known, t)
	return ok
}

// Types lists the known command types, sorted; the slice is a copy.
func Types() []string { return slices.Clone(known) }
