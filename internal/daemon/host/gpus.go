package host

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
)

// The bounds of one nvidia-smi run (docs/gpus.md).
const (
	// DefaultNvidiaSMITimeout is how long nvidia-smi may take before it is killed. A healthy
	// driver answers in well under a second even with 8 GPUs; one that does not answer in this
	// time is wedged, which is itself worth reporting.
	DefaultNvidiaSMITimeout = 10 * time.Second
	// DefaultNvidiaSMIMaxOutput is the most bytes of output accepted from nvidia-smi -q -x: an
	// 8-GPU node prints about 100 KiB with processes listed, so 4 MiB leaves room for many more
	// GPUs and processes while bounding what a misbehaving program can make the daemon hold.
	DefaultNvidiaSMIMaxOutput = 4 << 20
	// stderrMax is how much of nvidia-smi's standard error is kept for the error message.
	stderrMax = 4 << 10
)

// nvidiaQuery is the nvidia-smi invocation whose output ParseNvidiaSMI reads: the full query,
// as XML (the DTD nvidia-smi names is nvsmi_device_v12.dtd in current drivers).
var nvidiaQuery = []string{"-q", "-x"}

// GPUReport is what nvidia-smi says of a host's NVIDIA GPUs.
type GPUReport struct {
	// GPUs in nvidia-smi's order, which is their index.
	GPUs []*daemonv1.Gpu
	// Driver is the driver stack; nil when nvidia-smi did not name a driver version.
	Driver *daemonv1.GpuDriver
	// Health is what the same output says of each GPU's health, in the same order (see
	// GPUReading): the health collector reads it from the same bounded probe.
	Health []GPUReading
}

// gpuProbe is one nvidia-smi run and its result, shared by the callers that wait for it.
type gpuProbe struct {
	done    chan struct{}
	waiters int // callers sharing this run, beyond the one that started it; under Inventory.mu
	report  GPUReport
	err     error
}

// GPUs runs nvidia-smi -q -x and reads the GPUs it lists, their NUMA nodes from sysfs under
// Root.
//
// A host without nvidia-smi, or whose nvidia-smi finds no devices, has no GPUs and that is not
// an error. The run is bounded: it is killed after NvidiaSMITimeout (an error that says so: a
// wedged driver), its output is refused beyond NvidiaSMIMaxOutput, and at most one runs at a
// time: a call while one is running waits for it and shares its result. A caller whose ctx ends
// returns then, while the run it started goes on, bounded by the timeout, for the others.
//
// Fields that cannot be read are left empty and named in the error that comes with the report.
func (i *Inventory) GPUs(ctx context.Context) (GPUReport, error) {
	i.mu.Lock()
	p := i.probe
	if p != nil {
		p.waiters++
	} else {
		p = &gpuProbe{done: make(chan struct{})}
		i.probe = p
		go func() {
			// Not the caller's ctx: a run others wait for must not end with the first caller.
			// Its values (a logger, a trace) are kept; the timeout bounds it.
			p.report, p.err = i.probeGPUs(context.WithoutCancel(ctx))
			i.mu.Lock()
			i.probe = nil
			i.mu.Unlock()
			close(p.done)
		}()
	}
	i.mu.Unlock()
	select {
	case <-p.done:
		// The report is shared: each caller gets its own copy to change.
		out := GPUReport{Driver: proto.CloneOf(p.report.Driver)}
		for _, g := range p.report.GPUs {
			out.GPUs = append(out.GPUs, proto.CloneOf(g))
		}
		for _, r := range p.report.Health {
			r.Signals = slices.Clone(r.Signals)
			out.Health = append(out.Health, r)
		}
		return out, p.err
	case <-ctx.Done():
		return GPUReport{}, fmt.Errorf("nvidia-smi: %w", ctx.Err())
	}
}

// errNoNvidiaGPUs is what runNvidiaSMI says of a host without NVIDIA GPUs to report: nvidia-smi
// configured but not installed, or installed and finding no devices. It is not a failure.
var errNoNvidiaGPUs = errors.New("no NVIDIA GPUs")

// probeGPUs is one bounded run of nvidia-smi -q -x, then one of nvidia-smi topo -m for the
// links between the GPUs it found (topology.go): a failure of the second is logged and leaves
// the links empty, never the report.
func (i *Inventory) probeGPUs(ctx context.Context) (GPUReport, error) {
	prog := i.nvidiaSMIProgram()
	if prog == "" {
		return GPUReport{}, nil
	}
	out, err := i.runNvidiaSMI(ctx, prog, nvidiaQuery)
	if errors.Is(err, errNoNvidiaGPUs) {
		return GPUReport{}, nil
	}
	if err != nil {
		return GPUReport{}, err
	}
	report, err := ParseNvidiaSMI(out)
	for _, g := range report.GPUs {
		if n, ok := i.numaNode(g.GetPciBusId()); ok {
			g.NumaNode = proto.Int32(n)
		}
	}
	if len(report.GPUs) > 0 {
		if terr := i.topology(ctx, prog, report.GPUs); terr != nil {
			i.logger().Warn("inventory: GPU topology through nvidia-smi topo -m; links left empty", "err", terr)
		}
	}
	return report, err
}

// nvidiaSMIProgram is the nvidia-smi to run: NvidiaSMI, or the one on PATH; empty for none
// ("-", or none on PATH: no NVIDIA driver tools, so no GPUs to report).
func (i *Inventory) nvidiaSMIProgram() string {
	prog := i.NvidiaSMI
	if prog == "-" {
		return ""
	}
	if prog == "" {
		p, err := exec.LookPath("nvidia-smi")
		if err != nil {
			return ""
		}
		prog = p
	}
	return prog
}

// runNvidiaSMI runs prog with args under the bounds of docs/gpus.md: killed after
// NvidiaSMITimeout, its output refused (never half-read) beyond NvidiaSMIMaxOutput, its
// standard error kept to stderrMax for the message. It returns standard output, or
// errNoNvidiaGPUs where prog is not installed or finds no devices, or an error that names the
// invocation and says why (context.DeadlineExceeded wrapped for a timeout).
func (i *Inventory) runNvidiaSMI(ctx context.Context, prog string, args []string) ([]byte, error) {
	return i.runNvidiaSMIFor(ctx, prog, args, i.NvidiaSMITimeout)
}

// runNvidiaSMIFor is runNvidiaSMI with its own timeout (DefaultNvidiaSMITimeout when 0), for
// the invocations that take longer than a query (a GPU reset).
func (i *Inventory) runNvidiaSMIFor(ctx context.Context, prog string, args []string, timeout time.Duration) ([]byte, error) {
	if timeout <= 0 {
		timeout = DefaultNvidiaSMITimeout
	}
	limit := i.NvidiaSMIMaxOutput
	if limit <= 0 {
		limit = DefaultNvidiaSMIMaxOutput
	}
	run := runBounded(ctx, prog, args, timeout, limit)
	invocation := prog + " " + strings.Join(args, " ")
	switch {
	case run.over:
		return nil, fmt.Errorf("%s: output over %d bytes, refused", invocation, limit)
	case run.timedOut:
		return nil, fmt.Errorf("%s: no answer in %v (a wedged driver?): %w", invocation,
			run.took.Round(time.Millisecond), context.DeadlineExceeded)
	case errors.Is(run.err, fs.ErrNotExist) || errors.Is(run.err, exec.ErrNotFound):
		return nil, fmt.Errorf("%s: %w: not installed", invocation, errNoNvidiaGPUs)
	case run.err != nil:
		// "No devices were found" is exit status 6 on a host with the tools and no GPU.
		if strings.Contains(string(run.stdout)+run.stderr, "No devices were found") {
			return nil, fmt.Errorf("%s: %w: no devices were found", invocation, errNoNvidiaGPUs)
		}
		return nil, fmt.Errorf("%s: %w: %s", invocation, run.err, run.message())
	}
	return run.stdout, nil
}

// boundedRun is what runBounded saw of one run.
type boundedRun struct {
	stdout []byte // empty when over
	stderr string // at most stderrMax bytes
	err    error  // the run's own error (exec.ExitError, not found), nil on exit status 0
	// over says the output passed its limit: the program was killed and stdout is dropped.
	over bool
	// timedOut says the timeout, or ctx's deadline, ended the run.
	timedOut bool
	took     time.Duration
}

// message is the first line of what the run printed of its failure (stderr, else stdout).
func (r boundedRun) message() string {
	return strings.TrimSpace(firstLine(r.stderr + "\n" + string(r.stdout)))
}

// runBounded runs prog with args, killed after timeout (or at ctx's end) and as soon as its
// standard output passes limit bytes; standard error is kept to stderrMax. It is the one place
// bcd runs the NVIDIA tools (nvidia-smi, dcgmi), so that each has the same bounds.
func runBounded(ctx context.Context, prog string, args []string, timeout time.Duration, limit int64) boundedRun {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Output past the cap kills the program at once (over): it is refused, never half-read.
	stdout := &capped{max: int(limit), over: cancel}
	stderr := &capped{max: stderrMax}
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A child of the program (a wrapper script's) holding the output open must not outlast it.
	cmd.WaitDelay = time.Second
	start := time.Now()
	err := cmd.Run()
	r := boundedRun{err: err, stderr: stderr.String(), took: time.Since(start)}
	switch {
	case stdout.truncated():
		r.over = true
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		r.timedOut = true
	default:
		r.stdout = stdout.buf.Bytes()
	}
	return r
}

// numaNode reads the NUMA node of a PCI device from sysfs; false when sysfs does not know it
// (no such file, or -1: a machine with one node, or firmware that does not say).
func (i *Inventory) numaNode(busID string) (int32, bool) {
	addr := SysfsPCIAddress(busID)
	if addr == "" {
		return 0, false
	}
	n, err := readInt(i.path(filepath.Join("/sys/bus/pci/devices", addr, "numa_node")))
	if err != nil || n < 0 || n > 1<<20 {
		return 0, false
	}
	return int32(n), true
}

// SysfsPCIAddress is the name Linux gives, under /sys/bus/pci/devices, to the device nvidia-smi
// calls busID: lower case, with the 32-bit domain nvidia-smi prints as Linux prints it, at least
// four hex digits ("00000000:18:00.0" is "0000:18:00.0", "00010000:01:00.0" "10000:01:00.0").
// It is empty for what is not a PCI bus id.
func SysfsPCIAddress(busID string) string {
	domain, rest, ok := strings.Cut(strings.ToLower(strings.TrimSpace(busID)), ":")
	if !ok || len(rest) != len("18:00.0") || rest[2] != ':' || rest[5] != '.' {
		return ""
	}
	for _, c := range rest[:2] + rest[3:5] + rest[6:] {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return ""
		}
	}
	d, err := strconv.ParseUint(domain, 16, 32)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%04x:%s", d, rest)
}

// smiLog is the part of nvidia-smi -q -x's output (nvidia_smi_log) that is read.
type smiLog struct {
	XMLName       xml.Name `xml:"nvidia_smi_log"`
	DriverVersion string   `xml:"driver_version"`
	CudaVersion   string   `xml:"cuda_version"`
	GPUs          []smiGPU `xml:"gpu"`
}

// smiGPU is the part of one gpu element that is read.
type smiGPU struct {
	ID              string `xml:"id,attr"`
	ProductName     string `xml:"product_name"`
	PersistenceMode string `xml:"persistence_mode"`
	CurrentMIG      string `xml:"mig_mode>current_mig"`
	Serial          string `xml:"serial"`
	UUID            string `xml:"uuid"`
	MinorNumber     string `xml:"minor_number"`
	VBIOSVersion    string `xml:"vbios_version"`
	PCIBusID        string `xml:"pci>pci_bus_id"`
	MemoryTotal     string `xml:"fb_memory_usage>total"`
	// The power limit: drivers since about R530 write gpu_power_readings, older ones
	// power_readings with the limit set and the limit enforced.
	CurrentPowerLimit  string `xml:"gpu_power_readings>current_power_limit"`
	EnforcedPowerLimit string `xml:"power_readings>enforced_power_limit"`
	PowerLimit         string `xml:"power_readings>power_limit"`
	FabricState        string `xml:"fabric>state"`
	FabricStatus       string `xml:"fabric>status"`
	smiHealth
}

// ParseNvidiaSMI reads the output of nvidia-smi -q -x (nvidia_smi_log, DTD nvsmi_device_v12 and
// its predecessors): per GPU its UUID, model (product_name), serial, PCI bus id, memory
// (fb_memory_usage/total, in MiB), VBIOS, MIG mode (mig_mode/current_mig), power limit
// (gpu_power_readings/current_power_limit, or power_readings' enforced_power_limit or
// power_limit from older drivers, in W), persistence mode and minor number; and the driver and
// CUDA versions with the fabric manager's state (each GPU's fabric/state and fabric/status); and
// each GPU's health readings (GPUReading, docs/gpus.md "Signals").
//
// The XML has no index: the GPUs are listed in index order (nvidia-smi's and NVML's
// enumeration), which is what Index is. minor_number is the /dev/nvidia<N> number, which can
// differ. "N/A", "[N/A]", "Not Supported" and the like are an empty field. A field that should be
// a number and is not is left empty and named in the error, next to a report with everything
// else: one odd field does not hide the GPUs. Output that is not XML is an error, with no report.
func ParseNvidiaSMI(out []byte) (GPUReport, error) {
	var log smiLog
	if err := xml.Unmarshal(out, &log); err != nil {
		return GPUReport{}, fmt.Errorf("nvidia-smi -q -x: %w", err)
	}
	var report GPUReport
	var errs []error
	var fabricState, fabricStatus string
	for n, x := range log.GPUs {
		g := &daemonv1.Gpu{
			Index: int32(n), Model: value(x.ProductName), Uuid: value(x.UUID), Serial: value(x.Serial),
			PciBusId: value(x.PCIBusID), VbiosVersion: value(x.VBIOSVersion),
			PersistenceMode: strings.EqualFold(value(x.PersistenceMode), "Enabled"),
		}
		if g.PciBusId == "" {
			g.PciBusId = value(x.ID)
		}
		name := g.PciBusId
		if name == "" {
			name = strconv.Itoa(n)
		}
		fail := func(field, v string, err error) {
			errs = append(errs, fmt.Errorf("nvidia-smi -q -x: GPU %s: %s %q: %w", name, field, v, err))
		}
		switch m := strings.ToLower(value(x.CurrentMIG)); m {
		case "enabled", "disabled", "":
			g.MigMode = m
		default:
			fail("mig_mode/current_mig", x.CurrentMIG, errors.New("neither Enabled nor Disabled"))
		}
		if v := value(x.MinorNumber); v != "" {
			minor, err := strconv.ParseInt(v, 10, 32)
			if err != nil {
				fail("minor_number", v, err)
			}
			g.MinorNumber = int32(minor)
		}
		if v := value(x.MemoryTotal); v != "" {
			mib, err := quantity(v, "MiB")
			if err != nil {
				fail("fb_memory_usage/total", v, err)
			}
			g.MemoryBytes = int64(mib) << 20
		}
		for _, l := range []struct{ field, v string }{
			{"gpu_power_readings/current_power_limit", x.CurrentPowerLimit},
			{"power_readings/enforced_power_limit", x.EnforcedPowerLimit},
			{"power_readings/power_limit", x.PowerLimit},
		} {
			if v := value(l.v); v != "" {
				w, err := quantity(v, "W")
				if err != nil {
					fail(l.field, v, err)
					continue
				}
				g.PowerLimitWatts = w
				break
			}
		}
		if s := value(x.FabricState); s != "" && (fabricState == "" || fabricState == "Completed" && s != "Completed") {
			fabricState, fabricStatus = s, value(x.FabricStatus)
		}
		health, herrs := x.reading(g.Uuid, g.PciBusId)
		for _, err := range herrs {
			errs = append(errs, fmt.Errorf("nvidia-smi -q -x: GPU %s: %w", name, err))
		}
		report.GPUs = append(report.GPUs, g)
		report.Health = append(report.Health, health)
	}
	if v := value(log.DriverVersion); v != "" {
		report.Driver = &daemonv1.GpuDriver{
			DriverVersion: v, CudaVersion: value(log.CudaVersion),
			FabricManagerState: fabricState, FabricManagerStatus: fabricStatus,
		}
	}
	return report, errors.Join(errs...)
}

// value is an element's text, empty for the ways nvidia-smi says it has none.
func value(s string) string {
	s = strings.TrimSpace(s)
	switch strings.ToLower(strings.Trim(s, "[]")) {
	case "n/a", "not supported", "not available", "unknown", "unknown error", "insufficient permissions", "none":
		return ""
	}
	return s
}

// quantity parses "81559 MiB" or "700.00 W" in the unit given.
func quantity(s, unit string) (float64, error) {
	num, ok := strings.CutSuffix(s, " "+unit)
	if !ok {
		return 0, fmt.Errorf("not in %s", unit)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("not a number of %s", unit)
	}
	return v, nil
}

// firstLine is the first line of s with something on it.
func firstLine(s string) string {
	for line := range strings.SplitSeq(s, "\n") {
		if strings.TrimSpace(line) != "" {
			return line
		}
	}
	return ""
}
