package sim

import (
	"errors"
	"fmt"
	"strings"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/gpuhealth"
)

// Errors of InjectGPU, ClearGPU and GPUHealth, for callers that tell the cases apart (the control
// socket names the request's field).
var (
	// ErrNoMachine: no machine of the fleet has that hostname.
	ErrNoMachine = errors.New("no such machine")
	// ErrNoGPU: the machine has no GPU of that index.
	ErrNoGPU = errors.New("no such GPU")
	// ErrNotStarted: the machine has not joined yet, so it has no daemon to report anything.
	ErrNotStarted = errors.New("the machine's daemon has not started (it has not joined yet)")
)

// InjectGPU makes machine hostname report a GPU health signal, as bcd's checks would see it: of
// its GPU gpuIndex (nvidia-smi's index, named in the signal by the inventory's UUID and PCI bus
// id), check (gpuhealth's names), with code (the Xid for "xid"), count (1 when 0) and detail
// (when empty, what the source would print: the kernel log's Xid line, nvidia-smi's value). The
// same GPU, check and code again is counted (daemon.Fake.InjectGPUSignal). A node-wide check
// (driver_not_answering) ignores gpuIndex. The signals last until ClearGPU or a reboot command;
// a crash and restart of the daemon keeps them.
func (f *Fleet) InjectGPU(hostname string, gpuIndex int, check string, code, count int64, detail string) error {
	m, fake, err := f.fakeOf(hostname)
	if err != nil {
		return err
	}
	s := &daemonv1.GpuSignal{Check: check, Code: code, Count: count, Detail: detail}
	if check != gpuhealth.CheckDriverNotAnswering {
		g, err := m.gpu(gpuIndex)
		if err != nil {
			return err
		}
		s.GpuUuid, s.PciBusId = g.GetUuid(), g.GetPciBusId()
		if check == gpuhealth.CheckXid {
			s.PciBusId = kernelPCI(g.GetPciBusId())
		}
	}
	if s.Detail == "" {
		s.Detail = defaultDetail(s)
	}
	if err := fake.InjectGPUSignal(s); err != nil {
		return fmt.Errorf("sim: %s: %w", hostname, err)
	}
	f.gpuSignals.Add(1)
	return nil
}

// ClearGPU removes every GPU signal of machine hostname, as after a GPU reset: it reports an
// empty snapshot.
func (f *Fleet) ClearGPU(hostname string) error {
	_, fake, err := f.fakeOf(hostname)
	if err != nil {
		return err
	}
	fake.ClearGPUSignals()
	return nil
}

// GPUHealth is the GPU health snapshot machine hostname reports now.
func (f *Fleet) GPUHealth(hostname string) (*daemonv1.GpuHealth, error) {
	_, fake, err := f.fakeOf(hostname)
	if err != nil {
		return nil, err
	}
	return fake.GPUHealth(), nil
}

// fakeOf is machine hostname and its daemon.
func (f *Fleet) fakeOf(hostname string) (*machine, *daemon.Fake, error) {
	m, ok := f.byHost[hostname]
	if !ok {
		return nil, nil, fmt.Errorf("sim: %w: %q (the fleet has %s to %s)", ErrNoMachine, hostname, f.machines[0].hostname, f.machines[len(f.machines)-1].hostname)
	}
	m.mu.Lock()
	fake := m.fake
	m.mu.Unlock()
	if fake == nil {
		return nil, nil, fmt.Errorf("sim: %s: %w", hostname, ErrNotStarted)
	}
	return m, fake, nil
}

// gpu is the machine's GPU of nvidia-smi index i.
func (m *machine) gpu(i int) (*daemonv1.Gpu, error) {
	gpus := m.inv.GetGpus()
	for _, g := range gpus {
		if int(g.GetIndex()) == i {
			return g, nil
		}
	}
	if len(gpus) == 0 {
		return nil, fmt.Errorf("sim: %s: %w %d: the machine has no GPUs", m.hostname, ErrNoGPU, i)
	}
	return nil, fmt.Errorf("sim: %s: %w %d: the machine has %d GPUs, 0 to %d", m.hostname, ErrNoGPU, i, len(gpus), len(gpus)-1)
}

// kernelPCI is a PCI bus id as the kernel log's Xid lines print it: "0000:18:00" for nvidia-smi's
// "00000000:18:00.0".
func kernelPCI(id string) string {
	domain, rest, ok := strings.Cut(id, ":")
	if !ok || len(domain) < 4 {
		return id
	}
	rest, _, _ = strings.Cut(rest, ".")
	return domain[len(domain)-4:] + ":" + rest
}

// xidText is what the driver says of the Xids the simulator injects, as the kernel log ends the
// line.
var xidText = map[int64]string{
	13:  "Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0): Illegal Instruction Encoding",
	31:  "Ch 00000008, intr 10000000. MMU Fault: ENGINE GRAPHICS GPCCLIENT_T1_0 faulted @ 0x7f2a_00000000. Fault is of type FAULT_PDE ACCESS_TYPE_READ",
	43:  "Ch 00000010",
	48:  "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 1, subpartition 0.",
	63:  "Row Remapper: New row (0x0000000000012345) was marked for remapping, reset gpu to activate.",
	64:  "Row Remapper: Failed to mark row for remapping.",
	74:  "NVLink: fatal error detected on link 3(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)",
	79:  "GPU has fallen off the bus.",
	92:  "High single-bit ECC error rate",
	94:  "Contained: SM (0x1). RST: No, D-RST: No",
	95:  "Uncontained: FBHUB. RST: Yes, D-RST: No",
	119: "Timeout after 6s of waiting for RPC response from GPU0 GSP!",
}

// defaultDetail is what the source of s would say: the kernel log's Xid line, nvidia-smi's value.
func defaultDetail(s *daemonv1.GpuSignal) string {
	switch s.GetCheck() {
	case gpuhealth.CheckXid:
		text, ok := xidText[s.GetCode()]
		if !ok {
			text = "(simulated)"
		}
		return fmt.Sprintf("NVRM: Xid (PCI:%s): %d, pid=4242, name=python3, %s", s.GetPciBusId(), s.GetCode(), text)
	case gpuhealth.CheckRowRemapPending:
		return "Remapped Rows: Pending: Yes"
	case gpuhealth.CheckRowRemapFailure:
		return "Remapped Rows: Remapping Failure Occurred: Yes"
	case gpuhealth.CheckThermalSlowdown:
		return "Clocks Event Reasons: HW Thermal Slowdown: Active"
	case gpuhealth.CheckPowerSlowdown:
		return "Clocks Event Reasons: HW Power Brake Slowdown: Active"
	case gpuhealth.CheckDriverNotAnswering:
		return "nvidia-smi: timed out after 30s"
	case gpuhealth.CheckGPUMissing:
		return "Unable to determine the device handle for GPU " + s.GetPciBusId() + ": GPU is lost"
	}
	return "(simulated)"
}
