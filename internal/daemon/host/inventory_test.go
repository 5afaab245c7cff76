package host_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/better-compute/better-compute/internal/daemon/host"
)

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseCPUInfo(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file  string
		model string
		cpus  int32
	}{
		{"cpuinfo-amd-epyc-2cpu.txt", "AMD EPYC", 2},
		{"cpuinfo-arm64-neoverse-n1.txt", "(implementer 0x41, part 0xd0c)", 2},
	} {
		model, cpus := host.ParseCPUInfo(readTestdata(t, tc.file))
		if !strings.Contains(model, tc.model) || cpus != tc.cpus {
			t.Errorf("%s: model %q, %d CPUs; want %q, %d", tc.file, model, cpus, tc.model, tc.cpus)
		}
	}
	if model, cpus := host.ParseCPUInfo(nil); model != "" || cpus != 0 {
		t.Errorf("empty: %q %d", model, cpus)
	}
}

func TestParseMemInfo(t *testing.T) {
	t.Parallel()
	got, err := host.ParseMemInfo(readTestdata(t, "meminfo.txt"))
	if err != nil || got != 24683584*1024 {
		t.Errorf("MemTotal %d, %v", got, err)
	}
	if _, err := host.ParseMemInfo([]byte("MemFree: 12 kB\n")); err == nil {
		t.Error("no MemTotal: no error")
	}
}

func TestParseOSRelease(t *testing.T) {
	t.Parallel()
	if got := host.ParseOSRelease(readTestdata(t, "os-release-debian12")); got != "Debian GNU/Linux 12 (bookworm)" {
		t.Errorf("got %q", got)
	}
	if got := host.ParseOSRelease([]byte("NAME='Alpine Linux'\nVERSION_ID=3.20.1\n")); got != "Alpine Linux 3.20.1" {
		t.Errorf("without PRETTY_NAME: %q", got)
	}
}

// fakeRoot builds a /proc, /sys and /etc tree like a GPU server's.
func fakeRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	put := func(path, content string) {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("proc/cpuinfo", string(readTestdata(t, "cpuinfo-amd-epyc-2cpu.txt")))
	put("proc/meminfo", string(readTestdata(t, "meminfo.txt")))
	put("etc/os-release", string(readTestdata(t, "os-release-debian12")))
	// Disks: two real ones, and the kinds that are left out.
	put("sys/block/nvme0n1/size", "7501476528\n")
	put("sys/block/nvme0n1/device/model", "SAMSUNG MZQL23T8HCLS-00A07              \n")
	put("sys/block/sda/size", "937703088\n")
	put("sys/block/sda/device/model", "Micron_5300_MTFD\n")
	put("sys/block/loop0/size", "1000\n")
	put("sys/block/ram0/size", "1000\n")
	put("sys/block/zram0/size", "1000\n")
	put("sys/block/dm-0/size", "1000\n")                 // no device: a device-mapper volume
	put("sys/block/sr0/size", "0\n")                     // an empty optical drive
	put("sys/block/sr0/device/model", "Virtual CDROM\n") //
	// NICs: loopback is left out; a link that is down has no speed.
	put("sys/class/net/lo/address", "00:00:00:00:00:00\n")
	put("sys/class/net/lo/type", "772\n")
	put("sys/class/net/eth0/address", "0c:42:a1:12:34:56\n")
	put("sys/class/net/eth0/speed", "100000\n")
	put("sys/class/net/eth0/type", "1\n")
	put("sys/class/net/eno2/address", "0c:42:a1:12:34:57\n")
	put("sys/class/net/eno2/speed", "-1\n")
	put("sys/class/net/eno2/type", "1\n")
	// The NUMA nodes of the GPUs of testdata/nvidia-smi-xml/dgx-h100-8gpu.xml: 0 for the first
	// four, 1 for the others.
	for n, bus := range dgxBuses {
		put("sys/bus/pci/devices/0000:"+strings.ToLower(bus)+":00.0/numa_node", strconv.Itoa(n/4)+"\n")
	}
	return root
}

func TestCollectFakeHost(t *testing.T) {
	t.Parallel()
	smi := fakeNvidiaSMI(t, string(readTestdata(t, "nvidia-smi-xml/dgx-h100-8gpu.xml")), 0)
	inv, err := (&host.Inventory{Root: fakeRoot(t), NvidiaSMI: smi}).Collect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if inv.CpuModel != "AMD EPYC" || inv.Cpus != 2 || inv.MemoryBytes != 24683584*1024 || inv.Os != "Debian GNU/Linux 12 (bookworm)" {
		t.Errorf("inventory %v", inv)
	}
	if len(inv.Disks) != 2 || inv.Disks[0].Name != "nvme0n1" || inv.Disks[0].SizeBytes != 7501476528*512 ||
		inv.Disks[0].Model != "SAMSUNG MZQL23T8HCLS-00A07" || inv.Disks[1].Name != "sda" || inv.Disks[1].Model != "Micron_5300_MTFD" {
		t.Errorf("disks %v", inv.Disks)
	}
	if len(inv.Nics) != 2 || inv.Nics[0].Name != "eno2" || inv.Nics[0].SpeedMbps != 0 ||
		inv.Nics[1].Name != "eth0" || inv.Nics[1].Mac != "0c:42:a1:12:34:56" || inv.Nics[1].SpeedMbps != 100000 {
		t.Errorf("NICs %v", inv.Nics)
	}
	if len(inv.Gpus) != 8 || inv.Gpus[7].Index != 7 || inv.Gpus[7].GetNumaNode() != 1 || inv.Gpus[0].GetNumaNode() != 0 || inv.Gpus[0].NumaNode == nil {
		t.Errorf("GPUs %v", inv.Gpus)
	}
	if inv.GpuDriver.GetDriverVersion() != "550.54.15" || inv.GpuDriver.GetCudaVersion() != "12.4" {
		t.Errorf("GPU driver %v", inv.GpuDriver)
	}

	// nvidia-smi without a working driver, or with no GPU: no GPUs, and the rest is still there.
	for _, tc := range []struct {
		out  string
		exit int
	}{
		{"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.\n", 9},
		{"No devices were found\n", 6},
	} {
		inv, err := (&host.Inventory{Root: fakeRoot(t), NvidiaSMI: fakeNvidiaSMI(t, tc.out, tc.exit)}).Collect(t.Context())
		if err != nil || len(inv.Gpus) != 0 || inv.Cpus != 2 {
			t.Errorf("nvidia-smi exit %d: %v, %v", tc.exit, inv, err)
		}
	}
}

// TestCollectThisHost reads this machine, checking against what the kernel says through other
// interfaces.
func TestCollectThisHost(t *testing.T) {
	t.Parallel()
	inv, err := (&host.Inventory{}).Collect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := onlineCPUs(t); inv.Cpus != want {
		t.Errorf("%d CPUs; /sys/devices/system/cpu/online says %d", inv.Cpus, want)
	}
	var si syscall.Sysinfo_t
	if err := syscall.Sysinfo(&si); err != nil {
		t.Fatal(err)
	}
	if want := int64(si.Totalram) * int64(si.Unit); inv.MemoryBytes != want {
		t.Errorf("memory %d; sysinfo says %d", inv.MemoryBytes, want)
	}
	if out, err := exec.Command("uname", "-r").Output(); err == nil && inv.Kernel != strings.TrimSpace(string(out)) {
		t.Errorf("kernel %q; uname -r says %q", inv.Kernel, out)
	}
	if h, _ := os.Hostname(); inv.Hostname != h {
		t.Errorf("hostname %q, want %q", inv.Hostname, h)
	}
	for _, d := range inv.Disks {
		if strings.HasPrefix(d.Name, "loop") || strings.HasPrefix(d.Name, "ram") || strings.HasPrefix(d.Name, "zram") || d.SizeBytes <= 0 {
			t.Errorf("disk %v should be left out", d)
		}
	}
	for _, n := range inv.Nics {
		if n.Name == "lo" {
			t.Error("loopback listed")
		}
	}
	t.Logf("this host: %v", inv)
}

// onlineCPUs parses /sys/devices/system/cpu/online ("0-3,8-11").
func onlineCPUs(t *testing.T) int32 {
	t.Helper()
	data, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Skip(err)
	}
	var n int32
	for r := range strings.SplitSeq(strings.TrimSpace(string(data)), ",") {
		lo, hi, found := strings.Cut(r, "-")
		a, _ := strconv.Atoi(lo)
		b := a
		if found {
			b, _ = strconv.Atoi(hi)
		}
		n += int32(b - a + 1)
	}
	return n
}

func TestNicAddresses(t *testing.T) {
	t.Parallel()
	addrs := map[string][]net.Addr{
		"eth0": {
			&net.IPNet{IP: net.ParseIP("fe80::1"), Mask: net.CIDRMask(64, 128)},
			&net.IPNet{IP: net.ParseIP("2001:db8::7"), Mask: net.CIDRMask(64, 128)},
			&net.IPNet{IP: net.ParseIP("10.0.3.17").To4(), Mask: net.CIDRMask(24, 32)},
			&net.IPAddr{IP: net.ParseIP("127.0.0.1")},
		},
	}
	inv, err := (&host.Inventory{Root: fakeRoot(t), NvidiaSMI: "-", Addresses: func(n string) []net.Addr { return addrs[n] }}).Collect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range inv.Nics {
		want := map[string][]string{"eth0": {"10.0.3.17", "2001:db8::7"}}[n.Name]
		if !slices.Equal(n.Addresses, want) {
			t.Errorf("%s: addresses %v, want %v (global unicast, IPv4 first)", n.Name, n.Addresses, want)
		}
	}
}
