package host_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/daemon/host"
	"github.com/better-compute/better-compute/internal/sim"
)

// The fixtures in testdata/nvidia-smi-topo are constructed from nvidia-smi's documented format,
// not recorded on a GPU machine: see the README there.

// topoGPUs are n GPUs as nvidia-smi -q -x would give them, with made-up UUIDs and no NUMA node.
func topoGPUs(n int) []*daemonv1.Gpu {
	var gpus []*daemonv1.Gpu
	for i := range n {
		gpus = append(gpus, &daemonv1.Gpu{Index: int32(i), Uuid: fmt.Sprintf("GPU-%08d-0000-4000-8000-000000000000", i)})
	}
	return gpus
}

// paths is each GPU's links as "peer:path:nvlinks", with the peer's UUID checked.
func paths(t *testing.T, gpus []*daemonv1.Gpu) [][]string {
	t.Helper()
	var out [][]string
	for _, g := range gpus {
		var row []string
		for _, l := range g.GetLinks() {
			if l.GetPeerUuid() != gpus[l.GetPeerIndex()].GetUuid() {
				t.Errorf("GPU%d to GPU%d: peer UUID %q", g.GetIndex(), l.GetPeerIndex(), l.GetPeerUuid())
			}
			row = append(row, fmt.Sprintf("%d:%s:%d", l.GetPeerIndex(), l.GetPath(), l.GetNvlinks()))
		}
		out = append(out, row)
	}
	return out
}

func TestParseNvidiaSMITopo(t *testing.T) {
	t.Parallel()
	t.Run("dgx-h100", func(t *testing.T) {
		t.Parallel()
		gpus := topoGPUs(8)
		gpus[0].NumaNode = proto.Int32(5) // from sysfs: kept
		if err := host.ParseNvidiaSMITopo(readTestdata(t, "nvidia-smi-topo/dgx-h100-8gpu.txt"), gpus); err != nil {
			t.Fatal(err)
		}
		nearest := []string{"mlx5_0", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_9", "mlx5_10", "mlx5_11"}
		for i, row := range paths(t, gpus) {
			var want []string
			for j := range 8 {
				if j != i {
					want = append(want, fmt.Sprintf("%d:NV18:18", j))
				}
			}
			if !slices.Equal(row, want) {
				t.Errorf("GPU%d links %v, want %v", i, row, want)
			}
			if !slices.Equal(gpus[i].GetNearNics(), []string{nearest[i]}) {
				t.Errorf("GPU%d near NICs %v, want %s", i, gpus[i].GetNearNics(), nearest[i])
			}
			if want := int32(i / 4); i > 0 && gpus[i].GetNumaNode() != want {
				t.Errorf("GPU%d NUMA node %d, want %d", i, gpus[i].GetNumaNode(), want)
			}
		}
		if gpus[0].GetNumaNode() != 5 {
			t.Errorf("GPU0 NUMA node %d: sysfs's 5 replaced", gpus[0].GetNumaNode())
		}
	})
	t.Run("pcie-l40s", func(t *testing.T) {
		t.Parallel()
		gpus := topoGPUs(8)
		if err := host.ParseNvidiaSMITopo(readTestdata(t, "nvidia-smi-topo/pcie-l40s-8gpu.txt"), gpus); err != nil {
			t.Fatal(err)
		}
		got := paths(t, gpus)
		want0 := []string{"1:PIX:0", "2:PXB:0", "3:PXB:0", "4:SYS:0", "5:SYS:0", "6:SYS:0", "7:SYS:0"}
		want6 := []string{"0:SYS:0", "1:SYS:0", "2:SYS:0", "3:SYS:0", "4:PXB:0", "5:PXB:0", "7:PIX:0"}
		if !slices.Equal(got[0], want0) || !slices.Equal(got[6], want6) {
			t.Errorf("GPU0 %v, GPU6 %v; want %v, %v", got[0], got[6], want0, want6)
		}
		for i, g := range gpus {
			near := []string{"mlx5_0"} // NODE to the onboard mlx5_2: not near
			if i >= 4 {
				near = []string{"mlx5_1"}
			}
			if !slices.Equal(g.GetNearNics(), near) || g.GetNumaNode() != int32(i/4) || g.NumaNode == nil {
				t.Errorf("GPU%d: near NICs %v, NUMA node %v", i, g.GetNearNics(), g.NumaNode)
			}
		}
	})
	t.Run("older-driver", func(t *testing.T) {
		t.Parallel()
		gpus := topoGPUs(4)
		if err := host.ParseNvidiaSMITopo(readTestdata(t, "nvidia-smi-topo/p100-driver384-4gpu.txt"), gpus); err != nil {
			t.Fatal(err)
		}
		got := paths(t, gpus)
		if want := []string{"1:PIX:0", "2:SYS:0", "3:SYS:0"}; !slices.Equal(got[0], want) {
			t.Errorf("GPU0 %v, want %v (SOC read as SYS)", got[0], want)
		}
		for i, g := range gpus {
			var near []string
			if i < 2 {
				near = []string{"mlx5_0"} // PHB to mlx5_1 for GPU2-3: not near
			}
			if !slices.Equal(g.GetNearNics(), near) || g.NumaNode != nil {
				t.Errorf("GPU%d: near NICs %v, NUMA node %v (no NUMA Affinity column)", i, g.GetNearNics(), g.NumaNode)
			}
		}
	})
}

func TestParseNvidiaSMITopoErrors(t *testing.T) {
	t.Parallel()
	gpus := topoGPUs(2)
	gpus[0].Links = []*daemonv1.GpuLink{{PeerIndex: 1, Path: "stale"}}
	if err := host.ParseNvidiaSMITopo([]byte("NVIDIA-SMI has failed\n"), gpus); err == nil || len(gpus[0].GetLinks()) != 1 {
		t.Errorf("no matrix: %v, links %v", err, gpus[0].GetLinks())
	}
	// A GPU the matrix does not list keeps no links; the others are read.
	gpus = topoGPUs(3)
	out := "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\tX\tNV4\t0-7\t0\nGPU1\tNV4\tX\t0-7\t0\n"
	err := host.ParseNvidiaSMITopo([]byte(out), gpus)
	if err == nil || !strings.Contains(err.Error(), "GPU2 not in the matrix") {
		t.Errorf("a missing GPU: %v", err)
	}
	if got := paths(t, gpus); !slices.Equal(got[0], []string{"1:NV4:4"}) || len(got[2]) != 0 {
		t.Errorf("links %v", got)
	}
	// A cell that is not a path is named; that row keeps no links.
	gpus = topoGPUs(2)
	out = "\tGPU0\tGPU1\nGPU0\tX\tfast?\nGPU1\tPHB\tX\n"
	if err := host.ParseNvidiaSMITopo([]byte(out), gpus); err == nil || !strings.Contains(err.Error(), `"fast?"`) ||
		len(gpus[0].GetLinks()) != 0 || len(gpus[1].GetLinks()) != 1 {
		t.Errorf("a bad cell: %v, %v", err, paths(t, gpus))
	}
}

// TestGPUsTopology runs a fake nvidia-smi that answers both -q -x and topo -m: the links are in
// the report, topo -m runs once for the same GPUs, and a topo -m that fails leaves the GPUs
// without links and the report without an error.
func TestGPUsTopology(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	xml, topo, runs := filepath.Join(dir, "q.xml"), filepath.Join(dir, "topo.txt"), filepath.Join(dir, "runs")
	if err := os.WriteFile(xml, readTestdata(t, "nvidia-smi-xml/dgx-h100-8gpu.xml"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(topo, readTestdata(t, "nvidia-smi-topo/dgx-h100-8gpu.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	smi := fakeProgram(t, "echo \"$1\" >> "+runs+"\ncase \"$1\" in -q) cat "+xml+";; topo) cat "+topo+";; *) exit 2;; esac\n")
	inv := &host.Inventory{NvidiaSMI: smi}
	for range 2 {
		got, err := inv.GPUs(t.Context())
		if err != nil || len(got.GPUs) != 8 {
			t.Fatalf("%d GPUs, %v", len(got.GPUs), err)
		}
		for _, g := range got.GPUs {
			if len(g.GetLinks()) != 7 || len(g.GetNearNics()) != 1 || g.GetLinks()[0].GetPath() != "NV18" {
				t.Errorf("GPU%d: links %v, near NICs %v", g.GetIndex(), g.GetLinks(), g.GetNearNics())
			}
		}
	}
	if data, _ := os.ReadFile(runs); strings.Count(string(data), "topo") != 1 || strings.Count(string(data), "-q") != 2 {
		t.Errorf("runs %q: want -q twice, topo once", data)
	}
	// A topo -m that hangs: no links, no error, the GPUs reported within the timeouts.
	hang := fakeProgram(t, "case \"$1\" in -q) cat "+xml+";; *) exec sleep 60;; esac\n")
	start := time.Now()
	got, err := (&host.Inventory{NvidiaSMI: hang, NvidiaSMITimeout: 300 * time.Millisecond}).GPUs(t.Context())
	if err != nil || len(got.GPUs) != 8 || len(got.GPUs[0].GetLinks()) != 0 {
		t.Errorf("topo -m hangs: %d GPUs, links %v, %v", len(got.GPUs), got.GPUs[0].GetLinks(), err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %v", d)
	}
}

// TestParseSimulatedNvidiaSMITopo reads what a simulated machine's nvidia-smi topo -m prints
// (the FakeDaemon's exec) back into the links and near NICs of the inventory it came from, for
// every shape the simulator builds.
func TestParseSimulatedNvidiaSMITopo(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for i := range 400 {
		inv := sim.Inventory(7, i, "sim")
		if len(inv.GetGpus()) < 2 {
			continue
		}
		seen[fmt.Sprintf("%s x%d", inv.GetGpus()[0].GetModel(), len(inv.GetGpus()))] = true
		out, _, code := daemon.SimulateExec(inv, "/usr/bin/nvidia-smi", []string{"topo", "-m"})
		gpus := make([]*daemonv1.Gpu, len(inv.GetGpus()))
		for n, g := range inv.GetGpus() {
			gpus[n] = &daemonv1.Gpu{Index: g.GetIndex(), Uuid: g.GetUuid()}
		}
		if err := host.ParseNvidiaSMITopo([]byte(out), gpus); err != nil || code != 0 {
			t.Fatalf("machine %d: exit %d, %v\n%s", i, code, err, out)
		}
		for n, want := range inv.GetGpus() {
			if len(want.GetLinks()) != len(inv.GetGpus())-1 {
				t.Errorf("machine %d GPU %d: the simulator gave %d links", i, n, len(want.GetLinks()))
			}
			if !slices.EqualFunc(gpus[n].GetLinks(), want.GetLinks(), func(a, b *daemonv1.GpuLink) bool { return proto.Equal(a, b) }) ||
				!slices.Equal(gpus[n].GetNearNics(), want.GetNearNics()) || gpus[n].GetNumaNode() != want.GetNumaNode() {
				t.Errorf("machine %d GPU %d:\n got %v %v %d\nwant %v %v %d", i, n, gpus[n].GetLinks(), gpus[n].GetNearNics(),
					gpus[n].GetNumaNode(), want.GetLinks(), want.GetNearNics(), want.GetNumaNode())
			}
		}
	}
	for _, shape := range []string{"NVIDIA H100 80GB HBM3 x8", "NVIDIA L40S x8", "NVIDIA RTX 4090 x4"} {
		if !seen[shape] {
			t.Errorf("no %s machine among the first 400 of seed 7 (seen %v)", shape, seen)
		}
	}
}
