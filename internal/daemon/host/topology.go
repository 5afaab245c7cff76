package host

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
)

// nvidiaTopo is the nvidia-smi invocation whose output ParseNvidiaSMITopo reads: the topology
// matrix of the GPUs and NICs.
var nvidiaTopo = []string{"topo", "-m"}

// topoRetry is how long a failed nvidia-smi topo -m is remembered before it is tried again for
// the same GPUs: the health collector probes every minute or so, and a driver whose topo -m
// fails (or hangs to the timeout) should not pay for it on every probe.
const topoRetry = 10 * time.Minute

// topoCache is the last nvidia-smi topo -m run, for the GPUs it was run for (key): the
// topology does not change while the GPUs stay the same, so it runs again only when they change,
// or topoRetry after a failure.
type topoCache struct {
	key string
	out []byte
	err error
	at  time.Time
}

// topology fills gpus' links, near NICs and, where sysfs gave none, NUMA nodes from nvidia-smi
// topo -m, run with the bounds of runNvidiaSMI (or from the last run, for the same GPUs). On an
// error the GPUs keep no links and no near NICs.
func (i *Inventory) topology(ctx context.Context, prog string, gpus []*daemonv1.Gpu) error {
	var key strings.Builder
	key.WriteString(prog)
	for _, g := range gpus {
		fmt.Fprintf(&key, "\n%d %s %s", g.GetIndex(), g.GetUuid(), g.GetPciBusId())
	}
	c := &i.topo
	if c.key != key.String() || c.err != nil && time.Since(c.at) >= topoRetry {
		out, err := i.runNvidiaSMI(ctx, prog, nvidiaTopo)
		*c = topoCache{key: key.String(), out: out, err: err, at: time.Now()}
	}
	if c.err != nil {
		return c.err
	}
	return ParseNvidiaSMITopo(c.out, gpus)
}

var (
	// ansiEscape is a terminal escape sequence: nvidia-smi underlines the matrix's header with
	// one even when its output is not a terminal.
	ansiEscape = regexp.MustCompile(`\x1b\[[0-9;]*[A-Za-z]`)
	// gpuLabel is a GPU's row and column label.
	gpuLabel = regexp.MustCompile(`^GPU([0-9]+)$`)
	// nicLegend is a line of the NIC legend of newer drivers: "  NIC0: mlx5_0".
	nicLegend = regexp.MustCompile(`^\s*(NIC[0-9]+)\s*:\s*(\S+)\s*$`)
	// nvLinks is an NVLink cell: "NV18", 18 bonded NVLinks.
	nvLinks = regexp.MustCompile(`^NV([0-9]+)$`)
	// otherPath is a cell of another kind than those documented, kept as printed.
	otherPath = regexp.MustCompile(`^[A-Z][A-Z0-9]{0,15}$`)
)

// affinityColumns are the matrix's columns after the devices, named in several words. Drivers
// print some of them (older ones only "CPU Affinity"); the rows have one cell for each.
var affinityColumns = [][]string{{"CPU", "Affinity"}, {"NUMA", "Affinity"}, {"GPU", "NUMA", "ID"}}

// ParseNvidiaSMITopo reads the matrix nvidia-smi topo -m prints into gpus, matched by index
// (row GPU<n> is the GPU whose Index is n): per GPU, its links (one per other GPU of gpus, in
// index order, with the path as the matrix names it: "NV#" with the number of NVLinks, "PIX",
// "PXB", "PHB", "NODE" or "SYS", the "SOC" of old drivers read as "SYS"), its near NICs (the NICs
// whose cell is PIX or PXB, by the interface name the NIC legend gives: NIC0 is mlx5_0 on newer
// drivers, while older ones head the column with mlx5_0 itself) and, where NumaNode is unset
// (sysfs did not say), its NUMA node from the "NUMA Affinity" column.
//
// Each GPU's links and near NICs are replaced. A GPU the matrix does not list, or whose row
// cannot be read, keeps none, and the error names it next to the others that were read; output
// with no matrix is an error that changes nothing.
func ParseNvidiaSMITopo(out []byte, gpus []*daemonv1.Gpu) error {
	lines := strings.Split(ansiEscape.ReplaceAllString(string(out), ""), "\n")
	header := -1
	for n, line := range lines {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "GPU0" && (len(f) == 1 || f[1] != "X") {
			header = n
			break
		}
	}
	if header < 0 {
		return errors.New("nvidia-smi topo -m: no matrix (no header row naming GPU0)")
	}
	devices, extra := topoHeader(strings.Fields(lines[header]))
	legend := map[string]string{}
	for _, line := range lines[header+1:] {
		if m := nicLegend.FindStringSubmatch(line); m != nil {
			legend[m[1]] = m[2]
		}
	}
	rows := map[int][]string{}
	for _, line := range lines[header+1:] {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if m := gpuLabel.FindStringSubmatch(f[0]); m != nil {
			n, err := strconv.Atoi(m[1])
			if err == nil {
				if _, dup := rows[n]; !dup {
					rows[n] = f[1:]
				}
			}
		}
	}
	byIndex := map[int]*daemonv1.Gpu{}
	for _, g := range gpus {
		byIndex[int(g.GetIndex())] = g
	}
	var errs []error
	for _, g := range gpus {
		g.Links, g.NearNics = nil, nil
		self := int(g.GetIndex())
		cells, ok := rows[self]
		if !ok {
			errs = append(errs, fmt.Errorf("nvidia-smi topo -m: GPU%d not in the matrix", self))
			continue
		}
		if len(cells) < len(devices) {
			errs = append(errs, fmt.Errorf("nvidia-smi topo -m: GPU%d: %d cells for %d devices", self, len(cells), len(devices)))
			continue
		}
		var links []*daemonv1.GpuLink
		var near []string
		var bad error
		for c, dev := range devices {
			cell := cells[c]
			if cell == "X" {
				continue
			}
			path, nvlinks, err := topoPath(cell)
			if err != nil {
				bad = fmt.Errorf("nvidia-smi topo -m: GPU%d to %s: %w", self, dev, err)
				break
			}
			if m := gpuLabel.FindStringSubmatch(dev); m != nil {
				peer, _ := strconv.Atoi(m[1])
				if p, ok := byIndex[peer]; ok && peer != self {
					links = append(links, &daemonv1.GpuLink{PeerIndex: int32(peer), PeerUuid: p.GetUuid(), Path: path, Nvlinks: nvlinks})
				}
				continue
			}
			if path == "PIX" || path == "PXB" {
				name := dev
				if l, ok := legend[dev]; ok {
					name = l
				}
				near = append(near, name)
			}
		}
		if bad != nil {
			errs = append(errs, bad)
			continue
		}
		g.Links, g.NearNics = links, near
		if g.NumaNode == nil {
			if c, ok := extra["NUMA Affinity"]; ok && len(devices)+c < len(cells) {
				if n, err := strconv.ParseInt(cells[len(devices)+c], 10, 32); err == nil && n >= 0 {
					g.NumaNode = proto.Int32(int32(n))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// topoHeader splits the matrix's header fields into the device columns (GPU0.., NIC0.. or
// mlx5_0..) and the affinity columns after them, by their place after the devices.
func topoHeader(fields []string) (devices []string, extra map[string]int) {
	extra = map[string]int{}
	n := 0
	for n < len(fields) && affinityAt(fields[n:]) == nil {
		n++
	}
	devices = fields[:n]
	for rest := fields[n:]; len(rest) > 0; {
		name := affinityAt(rest)
		if name == nil {
			name = rest[:1] // a column this parser does not know, in one word
		}
		extra[strings.Join(name, " ")] = len(extra)
		rest = rest[len(name):]
	}
	return devices, extra
}

// affinityAt is the affinity column whose name starts fields; nil when none does.
func affinityAt(fields []string) []string {
	for _, name := range affinityColumns {
		if len(fields) >= len(name) && strings.Join(fields[:len(name)], " ") == strings.Join(name, " ") {
			return name
		}
	}
	return nil
}

// topoPath reads one cell of the matrix: the path, "SOC" as "SYS", and the number of NVLinks.
func topoPath(cell string) (path string, nvlinks int32, err error) {
	if m := nvLinks.FindStringSubmatch(cell); m != nil {
		n, err := strconv.ParseInt(m[1], 10, 32)
		if err != nil {
			return "", 0, fmt.Errorf("%q: %w", cell, err)
		}
		return cell, int32(n), nil
	}
	switch cell {
	case "SOC":
		return "SYS", 0, nil
	case "PIX", "PXB", "PHB", "NODE", "SYS":
		return cell, 0, nil
	}
	if otherPath.MatchString(cell) {
		return cell, 0, nil // a kind a newer driver may print: kept as printed
	}
	return "", 0, fmt.Errorf("%q is not a path", cell)
}
