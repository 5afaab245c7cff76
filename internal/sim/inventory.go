package sim

import (
	"fmt"
	"math/rand/v2"

	"google.golang.org/protobuf/proto"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
)

const (
	gib = int64(1) << 30
	mib = int64(1) << 20
)

// gpuModel is an accelerator as nvidia-smi names it, with the memory it reports.
type gpuModel struct {
	name   string
	memory int64
	// counts and their weights per machine.
	counts []weighted[int]
	// hosts are the CPU configurations such machines are built with.
	hosts []host
	// memoryPerGPU is the host memory per GPU, in GiB.
	memoryPerGPU []weighted[int64]
	// vbios is the video BIOS version its boards ship with.
	vbios string
	// powerWatts is its default power limit.
	powerWatts float64
	// serialPrefix starts its boards' 13-digit serial numbers.
	serialPrefix string
	// sxm is a module on a baseboard: 8 of them are connected by NVSwitches and laid out on the
	// PCI buses of a DGX. mig is whether it supports MIG; fabric whether it reports the fabric
	// manager's state (Hopper and later).
	sxm, mig, fabric bool
	// buses are the PCI buses of its GPUs, in order, on an 8-GPU machine.
	buses []string
	// nvlinks are the NVLinks of one GPU (sxm only): all of them to the NVSwitches on an 8-GPU
	// baseboard, shared out among the peers of a smaller one (gpuTopology).
	nvlinks int32
	// variant, when set, is a model that machines of this kind are built with instead, one in
	// variantOneIn: an H200 baseboard in an H100's chassis.
	variant      *gpuModel
	variantOneIn int
}

type host struct {
	cpuModel string
	cpus     int32
}

type weighted[T any] struct {
	v T
	w int
}

func pick[T any](r *rand.Rand, choices []weighted[T]) T {
	total := 0
	for _, c := range choices {
		total += c.w
	}
	n := r.IntN(total)
	for _, c := range choices {
		if n < c.w {
			return c.v
		}
		n -= c.w
	}
	return choices[len(choices)-1].v
}

func one[T any](r *rand.Rand, choices []T) T { return choices[r.IntN(len(choices))] }

var (
	// dgxH100Buses are the PCI buses of a DGX H100's (and H200's) eight GPUs.
	dgxH100Buses = []string{"18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"}
	h100         = gpuModel{
		name: "NVIDIA H100 80GB HBM3", memory: 81559 * mib,
		counts:       []weighted[int]{{8, 70}, {4, 20}, {2, 5}, {1, 5}},
		hosts:        []host{{"Intel(R) Xeon(R) Platinum 8480+", 112}, {"AMD EPYC 9454 48-Core Processor", 192}, {"Intel(R) Xeon(R) Platinum 8468", 192}},
		memoryPerGPU: []weighted[int64]{{256, 60}, {128, 40}},
		vbios:        "96.00.89.00.01", powerWatts: 700, serialPrefix: "1654", sxm: true, mig: true, fabric: true,
		buses: dgxH100Buses, nvlinks: 18, variant: &h200, variantOneIn: 3,
	}
	h200 = gpuModel{
		name: "NVIDIA H200", memory: 143771 * mib,
		vbios: "96.00.A5.00.01", powerWatts: 700, serialPrefix: "1655", sxm: true, mig: true, fabric: true,
		buses: dgxH100Buses, nvlinks: 18,
	}
	a100 = gpuModel{
		name: "NVIDIA A100-SXM4-80GB", memory: 81920 * mib,
		counts:       []weighted[int]{{8, 75}, {4, 25}},
		hosts:        []host{{"AMD EPYC 7763 64-Core Processor", 128}, {"AMD EPYC 7742 64-Core Processor", 128}, {"Intel(R) Xeon(R) Platinum 8358 CPU @ 2.60GHz", 64}},
		memoryPerGPU: []weighted[int64]{{128, 50}, {256, 50}},
		vbios:        "92.00.45.00.03", powerWatts: 400, serialPrefix: "1323", sxm: true, mig: true, nvlinks: 12,
		buses: []string{"07", "0F", "47", "4E", "87", "90", "B7", "BD"}, // a DGX A100's
	}
	l40s = gpuModel{
		name: "NVIDIA L40S", memory: 46068 * mib,
		counts:       []weighted[int]{{1, 20}, {2, 25}, {4, 35}, {8, 20}},
		hosts:        []host{{"AMD EPYC 9354 32-Core Processor", 64}, {"Intel(R) Xeon(R) Gold 6448Y", 64}, {"AMD EPYC 9254 24-Core Processor", 48}},
		memoryPerGPU: []weighted[int64]{{64, 50}, {96, 30}, {128, 20}},
		vbios:        "95.02.66.00.02", powerWatts: 350, serialPrefix: "1322",
		buses: pcieBuses,
	}
	rtx4090 = gpuModel{
		name: "NVIDIA RTX 4090", memory: 24564 * mib,
		counts:       []weighted[int]{{1, 30}, {2, 30}, {4, 25}, {8, 15}},
		hosts:        []host{{"AMD Ryzen Threadripper PRO 5975WX 32-Cores", 64}, {"AMD Ryzen 9 7950X 16-Core Processor", 32}, {"AMD EPYC 7443P 24-Core Processor", 48}},
		memoryPerGPU: []weighted[int64]{{32, 40}, {64, 60}},
		vbios:        "95.02.18.80.87", powerWatts: 450, serialPrefix: "",
		buses: pcieBuses,
	}
	// pcieBuses are the PCI buses of the GPUs of a PCIe server, one a root port.
	pcieBuses = []string{"01", "21", "41", "61", "81", "A1", "C1", "E1"}
	// drivers are the NVIDIA driver branches in the fleet, with the CUDA version each supports.
	drivers = []struct{ version, cuda string }{
		{"550.54.15", "12.4"}, {"550.90.07", "12.4"}, {"550.127.05", "12.4"}, {"560.35.03", "12.6"}, {"570.86.15", "12.8"},
	}
	// gpuMix is the share of each kind of machine; nil is a CPU-only machine.
	gpuMix = []weighted[*gpuModel]{{nil, 45}, {&h100, 15}, {&a100, 12}, {&l40s, 14}, {&rtx4090, 14}}

	cpuHosts = []weighted[host]{
		{host{"AMD EPYC 9654 96-Core Processor", 192}, 10},
		{host{"AMD EPYC 7713 64-Core Processor", 128}, 15},
		{host{"Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz", 128}, 15},
		{host{"AMD EPYC 7443P 24-Core Processor", 48}, 20},
		{host{"Intel(R) Xeon(R) E-2388G CPU @ 3.20GHz", 16}, 15},
		{host{"AMD EPYC 4344P 8-Core Processor", 16}, 15},
		{host{"Intel(R) Xeon(R) E-2334 CPU @ 3.40GHz", 8}, 10},
	}
	kernels = []string{"6.8.0-45-generic", "5.15.0-119-generic", "6.1.0-25-amd64", "6.5.0-1024-aws", "6.8.0-1015-nvidia"}
	// NVMe drives by capacity as they report it.
	nvme = []struct {
		size  int64
		model string
	}{
		{960197124096, "SAMSUNG MZQL2960HCJR-00A07"},
		{1920383410176, "Micron_7450_MTFDKCC1T9TFR"},
		{3840755982336, "SAMSUNG MZQL23T8HCLS-00A07"},
		{3840755982336, "KIOXIA KCD8XRUG3T84"},
		{7681501126656, "INTEL SSDPF2KX076T1"},
	}
)

// Inventory is machine index's hardware in a fleet built from seed: the same seed and index give
// the same machine, so a restarted simulator reports what it reported before. Hostnames are
// "<prefix>-0001" and up.
func Inventory(seed uint64, index int, prefix string) *daemonv1.Inventory {
	r := rand.New(rand.NewPCG(seed, uint64(index)))
	inv := &daemonv1.Inventory{
		Hostname: Hostname(prefix, index),
		Os:       "linux",
		Kernel:   one(r, kernels),
	}
	gpu := pick(r, gpuMix)
	var h host
	var disks, nics int
	if gpu == nil {
		h = pick(r, cpuHosts)
		inv.MemoryBytes = int64(h.cpus) * one(r, []int64{4, 8}) * gib
		disks, nics = 1+r.IntN(4), 1+r.IntN(2)
	} else {
		h = one(r, gpu.hosts)
		n := pick(r, gpu.counts)
		inv.MemoryBytes = max(int64(n)*pick(r, gpu.memoryPerGPU), 64) * gib
		for i := range n {
			inv.Gpus = append(inv.Gpus, &daemonv1.Gpu{Index: int32(i), Model: gpu.name, MemoryBytes: gpu.memory, Uuid: "GPU-" + uuidFrom(r)})
		}
		inv.GpuDriver = gpuIdentities(seed, index, gpu, inv.Gpus)
		disks, nics = 2+r.IntN(3), 2
		if n == 8 && (gpu == &h100 || gpu == &a100) {
			nics += 8 // one InfiniBand port per GPU
		}
	}
	inv.CpuModel, inv.Cpus = h.cpuModel, h.cpus
	if r.IntN(3) == 0 { // a SATA boot disk
		inv.Disks = append(inv.Disks, &daemonv1.Disk{Name: "sda", SizeBytes: 480103981056, Model: "SAMSUNG MZ7L3480HCHQ-00A07"})
	}
	for i := range disks {
		d := one(r, nvme)
		inv.Disks = append(inv.Disks, &daemonv1.Disk{Name: fmt.Sprintf("nvme%dn1", i), SizeBytes: d.size, Model: d.model})
	}
	// The management address: machine index's place in 10.0.0.0/8 (documentation ranges would
	// not be global unicast to the control plane's eyes either way).
	inv.Nics = append(inv.Nics, &daemonv1.Nic{Name: "eno1", Mac: macFrom(r), SpeedMbps: one(r, []int64{1000, 10000}),
		Addresses: []string{fmt.Sprintf("10.%d.%d.%d", index/254/256%256, index/254%256, index%254+1)}})
	for i := 1; i < nics; i++ {
		nic := &daemonv1.Nic{Name: fmt.Sprintf("enp%ds0f%dnp%d", 65+i/2, i%2, i%2), Mac: macFrom(r), SpeedMbps: one(r, []int64{25000, 100000})}
		if i >= 2 && gpu != nil && len(inv.Gpus) == 8 && nics > 2 {
			nic = &daemonv1.Nic{Name: fmt.Sprintf("ibp%ds0", 24+16*(i-2)), Mac: macFrom(r), SpeedMbps: 400000}
		}
		inv.Nics = append(inv.Nics, nic)
	}
	return inv
}

// gpuIdentities gives gpus what nvidia-smi reports of them beyond model, memory and UUID (serial,
// PCI bus id, NUMA node, VBIOS, MIG and persistence mode, power limit), and returns the node's
// driver. It draws from a generator of its own, so the machine's other draws (and so everything
// it reported before GPUs had identities) are unchanged. One H100 machine in variantOneIn is an
// H200 one.
func gpuIdentities(seed uint64, index int, gpu *gpuModel, gpus []*daemonv1.Gpu) *daemonv1.GpuDriver {
	r := rand.New(rand.NewPCG(seed^0x9e3779b97f4a7c15, uint64(index)))
	if gpu.variant != nil && r.IntN(gpu.variantOneIn) == 0 {
		gpu = gpu.variant
	}
	d := drivers[r.IntN(len(drivers))]
	driver := &daemonv1.GpuDriver{DriverVersion: d.version, CudaVersion: d.cuda}
	n := len(gpus)
	if gpu.fabric && gpu.sxm && n == 8 {
		driver.FabricManagerState, driver.FabricManagerStatus = "Completed", "Success"
	}
	persistence := r.IntN(10) != 0 // most operators turn it on
	for i, g := range gpus {
		g.Model, g.MemoryBytes = gpu.name, gpu.memory
		if gpu.serialPrefix != "" { // GeForce boards report no serial
			// A bijection of the GPU's place in the fleet onto 9 digits: unique within a seed
			// up to 125 million machines.
			g.Serial = fmt.Sprintf("%s%09d", gpu.serialPrefix, ((uint64(index)*8+uint64(i))*387420489+seed%1e9)%1e9)
		}
		g.PciBusId = "00000000:" + gpu.buses[i%len(gpu.buses)] + ":00.0"
		// Half the GPUs on each socket's NUMA node.
		g.NumaNode = proto.Int32(int32(i * 2 / max(n, 2)))
		g.VbiosVersion = gpu.vbios
		if gpu.mig {
			g.MigMode = "disabled"
		}
		g.PowerLimitWatts = gpu.powerWatts
		g.PersistenceMode = persistence
		g.MinorNumber = int32(i)
	}
	gpuTopology(gpu, gpus)
	return driver
}

// gpuTopology gives gpus the links and near NICs nvidia-smi topo -m reports on such a machine
// (docs/gpus.md "Topology"); it draws nothing, so it changes no other field of the fleet.
//
// SXM modules: on an 8-GPU baseboard every pair is joined through the NVSwitches by all of a
// GPU's NVLinks (NV18 on H100 and H200, NV12 on A100), and each GPU has its InfiniBand NIC on
// its PCIe switch (mlx5_<index>, PIX), as on a DGX; on smaller boards the GPUs are joined
// directly, a GPU's NVLinks shared out among its peers (NV6 between 4 H100s), with no near NIC.
// PCIe cards (L40S, RTX 4090): no NVLink; the GPUs are split between two PCIe switches, one per
// socket as the NUMA nodes say (GPU0-3 and GPU4-7 of 8), PIX under one switch, NODE between
// switches on one NUMA node, SYS across nodes; two GPUs are on their own root ports.
func gpuTopology(gpu *gpuModel, gpus []*daemonv1.Gpu) {
	n := len(gpus)
	perSwitch := max(n/2, 1)
	if n < 4 {
		perSwitch = 1
	}
	for i, g := range gpus {
		g.Links, g.NearNics = nil, nil
		for j, p := range gpus {
			if j == i {
				continue
			}
			l := &daemonv1.GpuLink{PeerIndex: int32(j), PeerUuid: p.GetUuid()}
			switch {
			case gpu.sxm && n == 8:
				l.Nvlinks = gpu.nvlinks
			case gpu.sxm:
				l.Nvlinks = gpu.nvlinks / int32(n-1)
			case i/perSwitch == j/perSwitch:
				l.Path = "PIX"
			case g.GetNumaNode() == p.GetNumaNode():
				l.Path = "NODE"
			default:
				l.Path = "SYS"
			}
			if l.Nvlinks > 0 {
				l.Path = fmt.Sprintf("NV%d", l.Nvlinks)
			}
			g.Links = append(g.Links, l)
		}
		if gpu.sxm && n == 8 {
			g.NearNics = []string{fmt.Sprintf("mlx5_%d", i)}
		}
	}
}

// Hostname is the name of machine index (0-based): "<prefix>-0001" for index 0.
func Hostname(prefix string, index int) string { return fmt.Sprintf("%s-%04d", prefix, index+1) }

// uuidFrom formats 16 bytes of r as a version 4 UUID, as the driver reports GPU UUIDs.
func uuidFrom(r *rand.Rand) string {
	var b [16]byte
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// macFrom is a locally administered unicast MAC address.
func macFrom(r *rand.Rand) string {
	var b [6]byte
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	b[0] = b[0]&0xfc | 0x02
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5])
}
