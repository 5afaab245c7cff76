// Package gpuhealth is the vocabulary of GPU health: the checks a daemon reports
// (bettercompute.daemon.v1.GpuSignal.check), the health states, the effects a policy gives a
// signal, and the policy itself (NVIDIA's Xid catalog and recovery guidance, as data). The daemon,
// the simulator, the gateway, the health reconciler and the API all use these names; none of
// them spells a check's name itself.
package gpuhealth

// Checks: what a daemon's health checks report, one name each.
const (
	// CheckXid is an Xid event from the kernel log (NVRM: Xid (PCI:…): N); Code is the Xid and
	// Count its occurrences since the daemon started reading the log.
	CheckXid = "xid"
	// CheckECCDoubleBit counts uncorrectable (double-bit) ECC errors, aggregate over the GPU's life.
	CheckECCDoubleBit = "ecc_dbe"
	// CheckECCSingleBit counts corrected (single-bit) ECC errors, aggregate.
	CheckECCSingleBit = "ecc_sbe"
	// CheckRetiredPagesPending: retired pages wait for a GPU reset to be blacklisted.
	CheckRetiredPagesPending = "retired_pages_pending"
	// CheckRowRemapPending: a remapped row waits for a GPU reset to take effect.
	CheckRowRemapPending = "row_remap_pending"
	// CheckRowRemapFailure: the GPU could not remap a row (its spare rows are used up).
	CheckRowRemapFailure = "row_remap_failure"
	// CheckRecoveryAction is the driver's recovery action (NVML's
	// NVML_FI_DEV_GET_GPU_RECOVERY_ACTION); Code is RecoveryReset, RecoveryReboot,
	// RecoveryDrainP2P or RecoveryDrainAndReset. None is not reported.
	CheckRecoveryAction = "recovery_action"
	// CheckThermalSlowdown: the hardware (or the driver) slows the GPU down for heat.
	CheckThermalSlowdown = "thermal_slowdown"
	// CheckPowerSlowdown: the hardware slows the GPU down for power (a brake or a power supply).
	CheckPowerSlowdown = "power_slowdown"
	// CheckNVLinkDown counts NVLink links that are down though the GPU has them.
	CheckNVLinkDown = "nvlink_down"
	// CheckNVLinkErrors counts the growth of NVLink CRC and replay errors since the daemon started.
	CheckNVLinkErrors = "nvlink_errors"
	// CheckPCIeReplays counts the growth of the PCIe replay counter since the daemon started.
	CheckPCIeReplays = "pcie_replays"
	// CheckPCIeLinkDegraded: the PCIe link trained below its maximum width or generation.
	CheckPCIeLinkDegraded = "pcie_link_degraded"
	// CheckGPUMissing: a GPU the node had is not there any more (fallen off the bus, removed).
	CheckGPUMissing = "gpu_missing"
	// CheckDriverNotAnswering: the health probe got no answer from the driver (nvidia-smi timed
	// out or failed); node-wide.
	CheckDriverNotAnswering = "driver_not_answering"
	// CheckManual is an operator's quarantine (gpus/quarantine), not a daemon's check.
	CheckManual = "manual"
)

// Recovery actions, the Code of CheckRecoveryAction, as NVML numbers them.
const (
	RecoveryNone          = 0
	RecoveryReset         = 1
	RecoveryReboot        = 2
	RecoveryDrainP2P      = 3
	RecoveryDrainAndReset = 4
)

// Checks lists every check a daemon may report, for validation and documentation.
var Checks = []string{
	CheckXid, CheckECCDoubleBit, CheckECCSingleBit, CheckRetiredPagesPending, CheckRowRemapPending,
	CheckRowRemapFailure, CheckRecoveryAction, CheckThermalSlowdown, CheckPowerSlowdown,
	CheckNVLinkDown, CheckNVLinkErrors, CheckPCIeReplays, CheckPCIeLinkDegraded, CheckGPUMissing,
	CheckDriverNotAnswering,
}

// Limits on a report, enforced by the gateway and kept by the daemon.
const (
	// MaxSignals is the most signals one GpuHealth may carry.
	MaxSignals = 4096
	// MaxCheckBytes bounds a signal's check name.
	MaxCheckBytes = 64
	// MaxDetailBytes bounds a signal's detail.
	MaxDetailBytes = 512
)

// ReconcileKind is the health reconciler's kind; its keys are node ids. The gateway queues a node
// when its daemon pushes a changed snapshot, and sync_node_devices (migration 0033) when a GPU
// comes, goes or moves.
const ReconcileKind = "gpu.health"

// QuarantineTaintKey is the taint the placer sees on a node a GPU health signal quarantines
// (effect NoSchedule): a lease that tolerates it (a diagnostic job) may still be placed there.
const QuarantineTaintKey = "gpu.bettercompute.io/quarantined"
