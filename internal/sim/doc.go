// Package sim is the fleet simulator: N FakeDaemons (package daemon) that join a deployment with
// one multi-use join token and hold their sessions through a gateway, as real machines would.
// Each has its own ECDSA key, certificate and TLS connection (that is what is simulated); they
// share only what real daemons would not need to keep apart in one process: the parsed root CA
// pool and the dialer. Used by `better-compute dev --sim N`, by `better-compute sim`, by tests
// and by the benchmarks in docs/benchmarks.md.
//
// # Machines
//
// Machine i is "<prefix>-0001" for i = 0 and so on, with an inventory drawn deterministically from
// the seed and i (see Inventory): about 45% CPU-only hosts (8 to 192 CPUs) and the rest GPU hosts
// with 1, 2, 4 or 8 of "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA L40S" or
// "NVIDIA RTX 4090", each with its memory and a unique "GPU-<uuid>"; memory, NVMe disks and NICs
// (InfiniBand on 8-GPU H100/A100 hosts) to match. The same seed gives the same fleet. Joins run
// at most Options.JoinConcurrency at a time (32 by default); transient join errors are retried
// twice, and the first few errors are kept (Fleet.JoinErrors). With Options.StateDir, each
// machine's identity is kept there and reused by the next run while its certificate is valid for
// another hour and the root CA is the same, so a restarted dev deployment keeps its nodes.
//
// # Faults
//
// A scenario, in YAML or JSON (`better-compute sim --scenario f.json`), lists faults:
//
//	{"faults": [
//	  {"kind": "disconnect", "fraction": 0.1, "every": "30s"},
//	  {"kind": "flap", "count": 5, "every": "5s", "for": "2m"},
//	  {"kind": "crash", "fraction": 0.01, "after": "1m", "every": "1m", "for": "10s"},
//	  {"kind": "latency", "fraction": 0.05, "delay": "200ms", "for": "1m", "every": "5m"},
//	  {"kind": "skew", "fraction": 0.02, "skew": "-90s"}
//	]}
//
// The same fault as a flag: `--fault disconnect,fraction=0.1,every=30s` (repeatable). Keys:
//
//   - kind: disconnect (break the TCP connection; the daemon sees its session fail and reconnects
//     with its backoff), flap (disconnect the same machines again and again), crash (stop the
//     daemon and kill its connection without a word to the gateway, then after the downtime start
//     it again with the same identity and what it kept: version, drain flag, configuration and
//     command record), latency (delay every write on the machine's
//     connections), skew (the machine's clock, as reported in hellos and heartbeats, is off).
//   - fraction (0 to 1) or count: how many machines each round hits (fraction wins). Each round
//     of disconnect, crash and latency picks machines afresh (among running ones); flap keeps
//     the machines it picked first; skew picks once, before the machines join.
//   - after: when the fault starts, counted from the end of the join phase (default 0).
//   - every: repeat period (default: once; flap: 10s).
//   - for: latency: how long the delay lasts (default: to the end); crash: the downtime
//     (default 5s); flap: how long the flapping goes on (default: to the end).
//   - delay (latency) and skew (skew, may be negative): durations such as "200ms" or "-90s".
//
// Skew supports no after, every or for: a machine's clock is off from its first hello. Random
// choices come from the seed, so a scenario replays the same way.
//
// # Workflow commands and failures
//
// The machines run every command a workflow sends, as bcd does but without touching anything
// (daemon.Fake): drain and undrain set a drain flag (exec is refused while it is set), configure
// keeps the configuration, exec runs nothing, upgrade restarts the daemon as the new version
// (reported in its next hello, the result after it), and reboot takes it away for
// Options.RebootDowntime before it comes back with a new session. Options.FailRate makes that
// share of upgrade, reboot, configure and exec commands fail, drawn from the seed: an upgrade is
// rolled back (the daemon comes back as the old version and reports it failed), a reboot comes
// back ten times later (or never, with Options.StuckReboots, until a crash restarts it), and
// configure and exec fail with an error (`better-compute sim --fail-rate 0.1 --reboot-downtime
// 5s`, `better-compute dev --sim N --sim-fail-rate 0.1`).
//
// # GPU faults
//
// Each machine's daemon reports GPU health (bettercompute.daemon.v1.GpuHealth): no signals at
// first, then what is injected. Fleet.InjectGPU makes a machine report a signal of one of its
// GPUs, named by the inventory's UUID and PCI bus id (`better-compute sim inject --node sim-0003
// --gpu 3 --xid 79`; the same GPU, check and code again is counted), Fleet.ClearGPU removes them
// all, as a GPU reset does; a reboot command clears them too, while a crash of the daemon keeps
// them (bcd reads the kernel log again). Options.GPUFaultRate injects faults at random: the
// expected share of all the fleet's GPUs that get one per hour (`--gpu-fault-rate 0.01`, one GPU
// in a hundred each hour), a Poisson process from the end of the join phase whose times, GPUs
// and kinds are drawn from the seed (Fleet.GPUFaultPlan lists them in advance). The kinds are
// drawn from a realistic mix: 60% application Xids (13, 31, 43; the default policy changes
// nothing for them), Xid 79 (fallen off the bus) 5%, 48 (double-bit ECC) 5%, 94 and 95
// (contained and uncontained ECC) 10%, row remap pending 10% and thermal slowdowns 10%, which pass
// after 2 to 10 minutes.
//
// ListenControl and ServeControl (StartControl does both) serve a small HTTP API on a unix
// socket, mode 0600, for processes outside the simulator: POST ControlInjectPath with an
// InjectRequest, POST ControlClearPath with a ClearRequest, GET ControlHealthPath?hostname=; each
// answers the machine's GPUHealthResponse, or a ControlError naming the field at fault. Bodies are
// at most MaxControlBody bytes. `better-compute sim --control PATH` serves it, and dev's simulator
// always does, at sim.sock in the directory of its machines' identities (printed as "Simulator
// control: <path>"), the default of `better-compute sim inject --control`.
//
// # Tunnels
//
// With Options.TunnelPorts the machines open tunnels as bcd does, to those ports of 127.0.0.1 on
// the machine the simulator runs on (`better-compute dev --sim N --sim-tunnel-ports 22,8888`).
// Options.TunnelRTT adds a round trip to their tunnel data plane alone (DelayConn: half of it
// each way, without lowering throughput below what the flow-control windows allow), so a
// benchmark on loopback measures a tunnel as it would cross a real network.
//
// # Command load
//
// Load creates commands through the API (commands/create) at a fixed rate across the connected
// machines and measures their round trip from the create call to the result recorded by the
// gateway; see Load for the method.
package sim
