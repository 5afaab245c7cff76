// Package command names the command types a node's daemon runs. It is the one list: the API
// refuses a commands/create of any other type, the reconcilers send these names, and bcd's
// handlers are registered under them, so a type cannot pass validation and then mean nothing
// (or carry bytes no one expected) further down the line.
package command

import "slices"

// Command types: the field names of the payload oneof (bettercompute.daemon.v1 defines one
// payload message per type; payloads in payload.go maps them). A type's result is described
// where its handler lives (daemon/host for bcd, daemon.Fake for the test daemon).
const (
	// Exec runs a program from the node's allow list (daemonv1.ExecPayload).
	Exec = "exec"
	// CollectInventory re-reads the node's inventory and returns it; the gateway stores it.
	CollectInventory = "collectInventory"
	// Drain tells a daemon its node is draining: it takes no new work.
	Drain = "drain"
	// Undrain tells a daemon to accept work again (after an uncordon); payload {}.
	Undrain = "undrain"
	// Upgrade asks a daemon to run another version (daemonv1.UpgradePayload: version, url,
	// sha256).
	Upgrade = "upgrade"
	// Reboot reboots the host, when bcd runs with --allow-reboot.
	Reboot = "reboot"
	// Configure asks a daemon to apply a configuration (daemonv1.ConfigurePayload).
	Configure = "configure"
	// Echo returns its payload's data: the simulator's and the tests' round trip.
	Echo = "echo"
	// GpuReset resets one GPU by UUID (daemonv1.GpuResetPayload), when bcd runs with
	// --allow-gpu-reset and no process holds the GPU.
	GpuReset = "gpuReset"
	// Diagnose runs DCGM's diagnostics (daemonv1.DiagnosePayload); its result is a
	// daemonv1.DiagnoseResult.
	Diagnose = "diagnose"
)

// known is every type, sorted.
var known = []string{CollectInventory, Configure, Diagnose, Drain, Echo, Exec, GpuReset, Reboot, Undrain, Upgrade}

// Known reports whether t is one of the command types above, exactly (case and all).
func Known(t string) bool {
	_, ok := slices.BinarySearch(known, t)
	return ok
}

// Types lists the known command types, sorted; the slice is a copy.
func Types() []string { return slices.Clone(known) }
