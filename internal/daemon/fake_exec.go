package daemon

import (
	"encoding/xml"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
)

// simulatedProgram writes what a well-known program would print on the FakeDaemon's machine,
// from its inventory: a simulated machine has no programs, but `dev` should answer the examples
// people try first with something plausible.
type simulatedProgram func(inv *daemonv1.Inventory, args []string) (stdout string)

// simulatedPrograms are the programs a FakeDaemon's exec answers with output, by absolute path;
// any other path succeeds silently, as the programs of simulated workflows should.
var simulatedPrograms = map[string]simulatedProgram{
	"/usr/bin/nvidia-smi": nvidiaSMI,
	"/usr/bin/uname":      uname,
	"/bin/uname":          uname,
	"/usr/bin/hostname":   func(inv *daemonv1.Inventory, _ []string) string { return inv.GetHostname() + "\n" },
	"/bin/hostname":       func(inv *daemonv1.Inventory, _ []string) string { return inv.GetHostname() + "\n" },
	"/usr/bin/nproc":      func(inv *daemonv1.Inventory, _ []string) string { return fmt.Sprintf("%d\n", inv.GetCpus()) },
	"/usr/bin/echo":       echo,
	"/bin/echo":           echo,
	"/usr/bin/uptime": func(*daemonv1.Inventory, []string) string {
		return " 12:00:00 up 42 days,  3:14,  0 users,  load average: 0.42, 0.37, 0.30\n"
	},
	"/usr/bin/free": free,
	"/usr/bin/df":   df,
	"/bin/df":       df,
	"/usr/bin/date": func(*daemonv1.Inventory, []string) string {
		return time.Now().UTC().Format("Mon Jan _2 15:04:05 UTC 2006") + "\n"
	},
	"/bin/date": func(*daemonv1.Inventory, []string) string {
		return time.Now().UTC().Format("Mon Jan _2 15:04:05 UTC 2006") + "\n"
	},
}

// SimulatedPrograms lists the paths a FakeDaemon's exec answers, sorted.
func SimulatedPrograms() []string {
	out := make([]string, 0, len(simulatedPrograms))
	for p := range simulatedPrograms {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// SimulateExec runs path on the simulated machine inv describes: its standard output and error
// and exit code, what a FakeDaemon's exec answers. The result the daemon reports says
// "simulated": true beside them, so nobody takes it for a real machine's.
func SimulateExec(inv *daemonv1.Inventory, path string, args []string) (stdout, stderr string, exitCode int) {
	if path == "/bin/false" || path == "/usr/bin/false" {
		return "", "", 1
	}
	program, ok := simulatedPrograms[path]
	if !ok {
		return "", fmt.Sprintf("simulated machine: %s ran and printed nothing (programs with simulated output: %s)\n",
			path, strings.Join(SimulatedPrograms(), ", ")), 0
	}
	return program(inv, args), "", 0
}

func echo(_ *daemonv1.Inventory, args []string) string {
	if len(args) > 0 && args[0] == "-n" {
		return strings.Join(args[1:], " ")
	}
	return strings.Join(args, " ") + "\n"
}

func uname(inv *daemonv1.Inventory, args []string) string {
	kernel := inv.GetKernel()
	if kernel == "" {
		kernel = "6.1.0-sim"
	}
	if slices.Contains(args, "-a") {
		return fmt.Sprintf("Linux %s %s #1 SMP PREEMPT_DYNAMIC x86_64 GNU/Linux\n", inv.GetHostname(), kernel)
	}
	if slices.Contains(args, "-r") {
		return kernel + "\n"
	}
	return "Linux\n"
}

// nvidiaSMI answers `nvidia-smi -L` with the GPU list, `nvidia-smi -q -x` with the XML query
// and `nvidia-smi topo -m` with the topology matrix (what bcd reads, internal/daemon/host/gpus.go
// and internal/daemon/host/topology.go), and anything else with the summary table.
func nvidiaSMI(inv *daemonv1.Inventory, args []string) string {
	var b strings.Builder
	if slices.Contains(args, "-q") && slices.Contains(args, "-x") && len(inv.GetGpus()) > 0 {
		return nvidiaSMIXML(inv)
	}
	if len(args) > 0 && args[0] == "topo" && slices.Contains(args, "-m") && len(inv.GetGpus()) > 0 {
		return nvidiaSMITopo(inv)
	}
	if slices.Contains(args, "-L") || slices.Contains(args, "--list-gpus") {
		for _, g := range inv.GetGpus() {
			fmt.Fprintf(&b, "GPU %d: %s (UUID: %s)\n", g.GetIndex(), g.GetModel(), g.GetUuid())
		}
		return b.String()
	}
	if len(inv.GetGpus()) == 0 {
		return "No devices were found\n"
	}
	b.WriteString("+-----------------------------------------------------------------------------------------+\n")
	driver, cuda := "570.00", "12.8"
	if d := inv.GetGpuDriver(); d != nil {
		driver, cuda = d.GetDriverVersion(), d.GetCudaVersion()
	}
	fmt.Fprintf(&b, "| NVIDIA-SMI %-10s (simulated) Driver Version: %-14s CUDA Version: %-8s |\n", driver, driver, cuda)
	b.WriteString("|-----------------------------------------+------------------------+----------------------+\n")
	for _, g := range inv.GetGpus() {
		model := g.GetModel()
		if len(model) > 30 {
			model = model[:30]
		}
		fmt.Fprintf(&b, "| %3d  %-30s   Off |                    Off |                    0 |\n", g.GetIndex(), model)
		fmt.Fprintf(&b, "| N/A   34C    P0             60W /  400W  |       0MiB / %6dMiB |      0%%      Default |\n", g.GetMemoryBytes()>>20)
	}
	b.WriteString("+-----------------------------------------+------------------------+----------------------+\n")
	return b.String()
}

func free(inv *daemonv1.Inventory, _ []string) string {
	total := inv.GetMemoryBytes() >> 20
	return fmt.Sprintf("               total        used        free      shared  buff/cache   available\nMem:      %10d  %10d  %10d           0           0  %10d\n",
		total, total/50, total-total/50, total-total/50)
}

func df(inv *daemonv1.Inventory, _ []string) string {
	var b strings.Builder
	b.WriteString("Filesystem      1K-blocks  Used Available Use% Mounted on\n")
	for i, d := range inv.GetDisks() {
		mount := "/"
		if i > 0 {
			mount = fmt.Sprintf("/mnt/disk%d", i)
		}
		kb := d.GetSizeBytes() >> 10
		fmt.Fprintf(&b, "/dev/%-10s %10d %5d %9d   1%% %s\n", d.GetName(), kb, kb/100, kb-kb/100, mount)
	}
	return b.String()
}

// smiXML is the part of nvidia-smi -q -x's output (DTD nvsmi_device_v12) a simulated machine
// prints: what bcd reads, and a few neighbours.
type smiXML struct {
	XMLName       xml.Name    `xml:"nvidia_smi_log"`
	Timestamp     string      `xml:"timestamp"`
	DriverVersion string      `xml:"driver_version"`
	CudaVersion   string      `xml:"cuda_version"`
	AttachedGPUs  int         `xml:"attached_gpus"`
	GPUs          []smiXMLGPU `xml:"gpu"`
}

type smiXMLGPU struct {
	ID              string `xml:"id,attr"`
	ProductName     string `xml:"product_name"`
	PersistenceMode string `xml:"persistence_mode"`
	MIG             struct {
		Current string `xml:"current_mig"`
		Pending string `xml:"pending_mig"`
	} `xml:"mig_mode"`
	Serial       string `xml:"serial"`
	UUID         string `xml:"uuid"`
	MinorNumber  int32  `xml:"minor_number"`
	VBIOSVersion string `xml:"vbios_version"`
	PCIBusID     string `xml:"pci>pci_bus_id"`
	MemoryTotal  string `xml:"fb_memory_usage>total"`
	PowerLimit   string `xml:"gpu_power_readings>current_power_limit"`
	Fabric       *struct {
		State  string `xml:"state"`
		Status string `xml:"status"`
	} `xml:"fabric,omitempty"`
}

// nvidiaSMIXML is nvidia-smi -q -x for the machine's GPUs.
func nvidiaSMIXML(inv *daemonv1.Inventory) string {
	na := func(s string) string {
		if s == "" {
			return "N/A"
		}
		return s
	}
	d := inv.GetGpuDriver()
	out := smiXML{
		Timestamp:     time.Now().UTC().Format("Mon Jan _2 15:04:05 2006"),
		DriverVersion: na(d.GetDriverVersion()), CudaVersion: na(d.GetCudaVersion()), AttachedGPUs: len(inv.GetGpus()),
	}
	for _, g := range inv.GetGpus() {
		x := smiXMLGPU{
			ID: g.GetPciBusId(), ProductName: g.GetModel(), PersistenceMode: "Disabled", Serial: na(g.GetSerial()), UUID: g.GetUuid(),
			MinorNumber: g.GetMinorNumber(), VBIOSVersion: na(g.GetVbiosVersion()), PCIBusID: g.GetPciBusId(),
			MemoryTotal: fmt.Sprintf("%d MiB", g.GetMemoryBytes()>>20), PowerLimit: "N/A",
		}
		if g.GetPersistenceMode() {
			x.PersistenceMode = "Enabled"
		}
		switch g.GetMigMode() {
		case "enabled":
			x.MIG.Current, x.MIG.Pending = "Enabled", "Enabled"
		case "disabled":
			x.MIG.Current, x.MIG.Pending = "Disabled", "Disabled"
		default:
			x.MIG.Current, x.MIG.Pending = "N/A", "N/A"
		}
		if w := g.GetPowerLimitWatts(); w > 0 {
			x.PowerLimit = fmt.Sprintf("%.2f W", w)
		}
		if d.GetFabricManagerState() != "" {
			x.Fabric = &struct {
				State  string `xml:"state"`
				Status string `xml:"status"`
			}{d.GetFabricManagerState(), na(d.GetFabricManagerStatus())}
		}
		out.GPUs = append(out.GPUs, x)
	}
	data, err := xml.MarshalIndent(out, "", "\t")
	if err != nil { // plain strings and numbers: cannot fail
		return ""
	}
	return xml.Header + "<!DOCTYPE nvidia_smi_log SYSTEM \"nvsmi_device_v12.dtd\">\n" + string(data) + "\n"
}

// nvidiaSMITopo is nvidia-smi topo -m for the machine's GPUs, as a recent driver prints it: the
// GPUs' links, then a NIC column for each near NIC (PIX to the GPUs that name it, NODE to the
// others on its NUMA node, SYS across), the CPU and NUMA affinity of each GPU (the machine's CPUs
// split evenly among its NUMA nodes), the legend and the NIC legend.
func nvidiaSMITopo(inv *daemonv1.Inventory) string {
	gpus := inv.GetGpus()
	var nics []string
	nicNUMA := map[string]int32{}
	nodes := int32(1)
	for _, g := range gpus {
		nodes = max(nodes, g.GetNumaNode()+1)
		for _, n := range g.GetNearNics() {
			if _, ok := nicNUMA[n]; !ok {
				nics = append(nics, n)
				nicNUMA[n] = g.GetNumaNode()
			}
		}
	}
	var b strings.Builder
	b.WriteString("\t\x1b[4m")
	for _, g := range gpus {
		fmt.Fprintf(&b, "GPU%d\t", g.GetIndex())
	}
	for n := range nics {
		fmt.Fprintf(&b, "NIC%d\t", n)
	}
	b.WriteString("CPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b[0m\n")
	perNode := max(inv.GetCpus()/nodes, 1)
	for _, g := range gpus {
		fmt.Fprintf(&b, "GPU%d", g.GetIndex())
		for _, p := range gpus {
			cell := "X"
			if p != g {
				cell = "SYS"
				for _, l := range g.GetLinks() {
					if l.GetPeerIndex() == p.GetIndex() {
						cell = l.GetPath()
					}
				}
			}
			b.WriteString("\t" + cell)
		}
		for _, n := range nics {
			b.WriteString("\t" + nicPath(g.GetNumaNode(), nicNUMA[n], slices.Contains(g.GetNearNics(), n)))
		}
		cpus, numa := "N/A", "N/A"
		if g.NumaNode != nil {
			node := g.GetNumaNode()
			cpus, numa = fmt.Sprintf("%d-%d", node*perNode, (node+1)*perNode-1), fmt.Sprint(node)
		}
		fmt.Fprintf(&b, "\t%s\t%s\tN/A\n", cpus, numa)
	}
	for n, nic := range nics {
		fmt.Fprintf(&b, "NIC%d", n)
		for _, g := range gpus {
			b.WriteString("\t" + nicPath(g.GetNumaNode(), nicNUMA[nic], slices.Contains(g.GetNearNics(), nic)))
		}
		for _, other := range nics {
			cell := "X"
			if other != nic {
				cell = nicPath(nicNUMA[nic], nicNUMA[other], false)
			}
			b.WriteString("\t" + cell)
		}
		b.WriteString("\n")
	}
	b.WriteString(`
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
`)
	if len(nics) > 0 {
		b.WriteString("\nNIC Legend:\n\n")
		for n, nic := range nics {
			fmt.Fprintf(&b, "  NIC%d: %s\n", n, nic)
		}
	}
	return b.String()
}

// nicPath is the matrix's cell between a device on NUMA node a and a NIC on b: PIX when the NIC
// is on the device's switch (near), else NODE on one node, SYS across.
func nicPath(a, b int32, near bool) string {
	switch {
	case near:
		return "PIX"
	case a == b:
		return "NODE"
	}
	return "SYS"
}
