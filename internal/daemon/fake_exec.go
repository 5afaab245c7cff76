package daemon

import (
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

// simulateExec runs path on the simulated machine: its output and exit code. The result the
// daemon reports says "simulated": true beside them, so nobody takes it for a real machine's.
func simulateExec(inv *daemonv1.Inventory, path string, args []string) (stdout, stderr string, exitCode int) {
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

// nvidiaSMI answers `nvidia-smi -L` with the GPU list, and anything else with the summary table.
func nvidiaSMI(inv *daemonv1.Inventory, args []string) string {
	var b strings.Builder
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
	b.WriteString("| NVIDIA-SMI 570.00 (simulated)      Driver Version: 570.00         CUDA Version: 12.8     |\n")
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
