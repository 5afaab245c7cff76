package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/scrub"
)

// Inventory reads what this host has: CPU model and count and memory from /proc, disks from
// /sys/block, network interfaces from /sys/class/net, the OS from /etc/os-release, the kernel
// from uname, and NVIDIA GPUs through nvidia-smi when it is installed (see GPUs).
//
// Collect is best effort: what cannot be read is left out and logged, because a node that
// cannot say what its disks are is still a node, and the session must not fail over it.
type Inventory struct {
	// Root is prepended to /proc, /sys and /etc paths, so tests can read a recorded tree; empty
	// is the real root.
	Root string
	// NvidiaSMI is the nvidia-smi program to run; empty looks it up on PATH, "-" means never.
	NvidiaSMI string
	// NvidiaSMITimeout bounds one run of nvidia-smi; 0 is DefaultNvidiaSMITimeout.
	NvidiaSMITimeout time.Duration
	// NvidiaSMIMaxOutput is the most bytes of output nvidia-smi may print, larger output being
	// refused; 0 is DefaultNvidiaSMIMaxOutput.
	NvidiaSMIMaxOutput int64
	// Addresses lists an interface's IP addresses; nil reads the host's own (net.InterfaceByName)
	// when Root is empty, and none otherwise.
	Addresses func(iface string) []net.Addr
	Logger    *slog.Logger

	// probe is the nvidia-smi run in flight, which concurrent callers share.
	mu    sync.Mutex
	probe *gpuProbe
	// topo is the last nvidia-smi topo -m read, which only the probe in flight touches.
	topo topoCache
}

// maxProbeError bounds the reason a failed GPU probe gives, in bytes.
const maxProbeError = 512

// Collect reads the inventory.
func (i *Inventory) Collect(ctx context.Context) (*daemonv1.Inventory, error) {
	log := i.logger()
	inv := &daemonv1.Inventory{Os: "linux"}
	if h, err := os.Hostname(); err == nil {
		inv.Hostname = h
	}
	if data, err := os.ReadFile(i.path("/proc/cpuinfo")); err != nil {
		log.Warn("inventory: read CPU information", "err", err)
	} else {
		inv.CpuModel, inv.Cpus = ParseCPUInfo(data)
	}
	if inv.Cpus == 0 {
		inv.Cpus = int32(runtime.NumCPU())
	}
	if data, err := os.ReadFile(i.path("/proc/meminfo")); err != nil {
		log.Warn("inventory: read memory information", "err", err)
	} else if inv.MemoryBytes, err = ParseMemInfo(data); err != nil {
		log.Warn("inventory: read memory information", "err", err)
	}
	inv.Os = i.os()
	inv.Kernel = kernel()
	inv.Disks = i.disks(log)
	inv.Nics = i.nics(log)
	gpus, err := i.GPUs(ctx)
	if err != nil {
		log.Warn("inventory: GPUs through nvidia-smi", "err", err)
		// No GPU read at all is a probe that failed, which the report says, so that the GPUs the
		// node had are kept as missing rather than taken as gone. A report with GPUs and a field
		// that did not parse is the GPUs it could read.
		if len(gpus.GPUs) == 0 && ctx.Err() == nil {
			inv.GpuProbeError = scrub.Truncate(err.Error(), maxProbeError)
		}
	}
	inv.Gpus, inv.GpuDriver = gpus.GPUs, gpus.Driver
	return inv, ctx.Err()
}

// logger is Logger, or one that discards.
func (i *Inventory) logger() *slog.Logger {
	if i.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return i.Logger
}

func (i *Inventory) path(p string) string {
	if i.Root == "" {
		return p
	}
	return filepath.Join(i.Root, p)
}

// ParseCPUInfo returns the CPU model and the number of logical CPUs listed in /proc/cpuinfo.
// x86 names the model in "model name"; other architectures use other keys, and arm64 names only
// the implementer and part numbers.
func ParseCPUInfo(data []byte) (model string, cpus int32) {
	fields := map[string]string{}
	for line := range strings.SplitSeq(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if k == "processor" {
			if _, err := strconv.Atoi(v); err == nil {
				cpus++
			}
		}
		if _, seen := fields[k]; !seen {
			fields[k] = v
		}
	}
	for _, k := range []string{"model name", "Processor", "cpu model", "cpu"} {
		if v := fields[k]; v != "" {
			return strings.Join(strings.Fields(v), " "), cpus
		}
	}
	if impl, part := fields["CPU implementer"], fields["CPU part"]; impl != "" {
		return fmt.Sprintf("%s (implementer %s, part %s)", runtime.GOARCH, impl, part), cpus
	}
	return "", cpus
}

// ParseMemInfo returns MemTotal from /proc/meminfo, in bytes.
func ParseMemInfo(data []byte) (int64, error) {
	for line := range strings.SplitSeq(string(data), "\n") {
		rest, ok := strings.CutPrefix(line, "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("MemTotal: %w", err)
		}
		if len(f) > 1 && f[1] != "kB" {
			return 0, fmt.Errorf("MemTotal: unknown unit %q", f[1])
		}
		return n * 1024, nil
	}
	return 0, errors.New("no MemTotal line")
}

// ParseOSRelease returns the operating system's name from os-release: PRETTY_NAME, or NAME and
// VERSION_ID.
func ParseOSRelease(data []byte) string {
	vals := map[string]string{}
	for line := range strings.SplitSeq(string(data), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		if u, err := strconv.Unquote(v); err == nil {
			v = u
		} else {
			v = strings.Trim(v, `"'`)
		}
		vals[k] = v
	}
	if v := vals["PRETTY_NAME"]; v != "" {
		return v
	}
	return strings.TrimSpace(vals["NAME"] + " " + vals["VERSION_ID"])
}

func (i *Inventory) os() string {
	for _, p := range []string{"/etc/os-release", "/usr/lib/os-release"} {
		if data, err := os.ReadFile(i.path(p)); err == nil {
			if name := ParseOSRelease(data); name != "" {
				return name
			}
		}
	}
	return "Linux"
}

// kernel is the kernel release, as uname -r prints it.
func kernel() string {
	var u syscall.Utsname
	if err := syscall.Uname(&u); err != nil {
		return ""
	}
	b := make([]byte, 0, len(u.Release))
	for _, c := range u.Release {
		if c == 0 {
			break
		}
		b = append(b, byte(c))
	}
	return string(b)
}

// disks lists the block devices backed by hardware (with a device link in sysfs), leaving out
// loop, RAM and zram devices, device-mapper and md volumes, and empty drives.
func (i *Inventory) disks(log *slog.Logger) []*daemonv1.Disk {
	base := i.path("/sys/block")
	entries, err := os.ReadDir(base)
	if err != nil {
		log.Warn("inventory: list disks", "err", err)
		return nil
	}
	var out []*daemonv1.Disk
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, "loop") || strings.HasPrefix(name, "ram") || strings.HasPrefix(name, "zram") {
			continue
		}
		dir := filepath.Join(base, name)
		if _, err := os.Stat(filepath.Join(dir, "device")); err != nil {
			continue // virtual: device-mapper, md, nbd, …
		}
		sectors, err := readInt(filepath.Join(dir, "size"))
		if err != nil || sectors <= 0 {
			continue
		}
		model, _ := readString(filepath.Join(dir, "device", "model"))
		// The size file counts 512-byte sectors whatever the device's block size.
		out = append(out, &daemonv1.Disk{Name: name, SizeBytes: sectors * 512, Model: model})
	}
	slices.SortFunc(out, func(a, b *daemonv1.Disk) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// nics lists the network interfaces but loopback, with their MAC address, link speed (0
// when the link is down or the driver does not say) and global unicast addresses: what a gang's
// members give their peers to reach them.
func (i *Inventory) nics(log *slog.Logger) []*daemonv1.Nic {
	base := i.path("/sys/class/net")
	entries, err := os.ReadDir(base)
	if err != nil {
		log.Warn("inventory: list network interfaces", "err", err)
		return nil
	}
	var out []*daemonv1.Nic
	for _, e := range entries {
		name := e.Name()
		dir := filepath.Join(base, name)
		if typ, err := readInt(filepath.Join(dir, "type")); name == "lo" || (err == nil && typ == 772) { // ARPHRD_LOOPBACK
			continue
		}
		mac, _ := readString(filepath.Join(dir, "address"))
		speed, err := readInt(filepath.Join(dir, "speed")) // EINVAL while the link is down
		if err != nil || speed < 0 {
			speed = 0
		}
		out = append(out, &daemonv1.Nic{Name: name, Mac: mac, SpeedMbps: speed, Addresses: i.addresses(name)})
	}
	slices.SortFunc(out, func(a, b *daemonv1.Nic) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func readString(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(data)), nil
}

func readInt(path string) (int64, error) {
	s, err := readString(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

// maxNicAddresses bounds the addresses reported of one interface.
const maxNicAddresses = 16

// addresses is the interface's global unicast addresses, without their prefix lengths, IPv4
// first, at most maxNicAddresses.
func (i *Inventory) addresses(iface string) []string {
	list := i.Addresses
	if list == nil {
		if i.Root != "" {
			return nil
		}
		list = func(name string) []net.Addr {
			nif, err := net.InterfaceByName(name)
			if err != nil {
				return nil
			}
			addrs, _ := nif.Addrs() // none when the kernel will not say
			return addrs
		}
	}
	var v4, v6 []string
	for _, a := range list(iface) {
		var ip net.IP
		switch a := a.(type) {
		case *net.IPNet:
			ip = a.IP
		case *net.IPAddr:
			ip = a.IP
		}
		switch {
		case ip == nil || !ip.IsGlobalUnicast():
		case ip.To4() != nil:
			v4 = append(v4, ip.String())
		default:
			v6 = append(v6, ip.String())
		}
	}
	out := append(v4, v6...)
	return out[:min(len(out), maxNicAddresses)]
}
