package host_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/daemon/host"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/sim"
)

// The fixtures in testdata/nvidia-smi-xml are constructed from nvidia-smi's documented XML
// format (nvsmi_device_v12.dtd), not recorded on a GPU machine: see the README there.

// dgxBuses are the PCI buses of the GPUs of testdata/nvidia-smi-xml/dgx-h100-8gpu.xml.
var dgxBuses = []string{"18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"}

func TestParseNvidiaSMI(t *testing.T) {
	t.Parallel()
	dgxUUIDs := []string{"GPU-3f2a7c1e-8b4d-4e6f-9a0b-1c2d3e4f5a61", "GPU-9d81b2c4-5e6f-4a7b-8c9d-0e1f2a3b4c52",
		"GPU-1e4c7a9b-2d3f-4b5c-8d6e-7f8091a2b3c4", "GPU-c0ffee11-2233-4455-8677-8899aabbccdd",
		"GPU-5a6b7c8d-9e0f-4a1b-9c2d-3e4f5a6b7c8d", "GPU-7b3e9f21-4c5d-4e6f-a7b8-c9d0e1f2a3b4",
		"GPU-2c4e6a8b-0d1f-4325-8769-8badcfe10324", "GPU-e8d7c6b5-a493-4827-b160-5f4e3d2c1b0a"}
	dgxSerials := []string{"1654523010428", "1654523011735", "1654523009912", "1654523010871",
		"1654523012204", "1654523011386", "1654523010093", "1654523012657"}
	dgxMinors := []int32{2, 3, 0, 1, 6, 7, 4, 5}
	var dgx []*daemonv1.Gpu
	for n, bus := range dgxBuses {
		dgx = append(dgx, &daemonv1.Gpu{
			Index: int32(n), Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 81559 << 20, Uuid: dgxUUIDs[n],
			Serial: dgxSerials[n], PciBusId: "00000000:" + bus + ":00.0", VbiosVersion: "96.00.89.00.01",
			MigMode: "disabled", PowerLimitWatts: 700, PersistenceMode: true, MinorNumber: dgxMinors[n],
		})
	}
	for _, tc := range []struct {
		file   string
		gpus   []*daemonv1.Gpu
		driver *daemonv1.GpuDriver
	}{
		{
			file: "dgx-h100-8gpu.xml", gpus: dgx,
			driver: &daemonv1.GpuDriver{DriverVersion: "550.54.15", CudaVersion: "12.4", FabricManagerState: "Completed", FabricManagerStatus: "Success"},
		},
		{
			// An older driver: the power limit under power_readings, no fabric section, no MIG.
			file: "v100-driver470-1gpu.xml",
			gpus: []*daemonv1.Gpu{{
				Index: 0, Model: "Tesla V100-PCIE-32GB", MemoryBytes: 32510 << 20, Uuid: "GPU-6b1f0e3d-2c4a-4b5e-8f7d-9a0c1b2d3e4f",
				Serial: "0324918045125", PciBusId: "00000000:3B:00.0", VbiosVersion: "88.00.80.00.01", PowerLimitWatts: 250,
			}},
			driver: &daemonv1.GpuDriver{DriverVersion: "470.223.02", CudaVersion: "11.4"},
		},
		{
			// "N/A" everywhere is empty fields, not errors; "N/A" fabric is no fabric.
			file: "na-fields-2gpu.xml",
			gpus: []*daemonv1.Gpu{
				{Index: 0, Model: "NVIDIA Graphics Device", Uuid: "GPU-0a1b2c3d-4e5f-4071-8293-a4b5c6d7e8f9", PciBusId: "00000000:01:00.0"},
				{
					Index: 1, Model: "NVIDIA H100 PCIe", MemoryBytes: 81559 << 20, Uuid: "GPU-4d5e6f70-8192-4a3b-bc4d-5e6f70819a2b",
					Serial: "1321123045871", PciBusId: "00000000:41:00.0", VbiosVersion: "96.00.30.00.01", MigMode: "enabled",
					PowerLimitWatts: 350, PersistenceMode: true, MinorNumber: 1,
				},
			},
			driver: &daemonv1.GpuDriver{DriverVersion: "535.183.01", CudaVersion: "12.2"},
		},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			got, err := host.ParseNvidiaSMI(readTestdata(t, filepath.Join("nvidia-smi-xml", tc.file)))
			if err != nil {
				t.Fatal(err)
			}
			if len(got.GPUs) != len(tc.gpus) {
				t.Fatalf("%d GPUs, want %d: %v", len(got.GPUs), len(tc.gpus), got.GPUs)
			}
			for n, want := range tc.gpus {
				if !proto.Equal(got.GPUs[n], want) {
					t.Errorf("GPU %d:\n got %v\nwant %v", n, got.GPUs[n], want)
				}
			}
			if !proto.Equal(got.Driver, tc.driver) {
				t.Errorf("driver %v, want %v", got.Driver, tc.driver)
			}
		})
	}
}

func TestParseNvidiaSMIOddOutput(t *testing.T) {
	t.Parallel()
	const head = `<?xml version="1.0" ?><nvidia_smi_log><driver_version>560.35.03</driver_version><cuda_version>12.6</cuda_version>`
	for _, tc := range []struct {
		name, xml, wantErr string
		check              func(host.GPUReport) bool
	}{
		{name: "not XML", xml: "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", wantErr: "nvidia-smi -q -x"},
		{name: "another root", xml: "<something/>", wantErr: "nvidia_smi_log"},
		{
			// A bad number is named, and the GPU and its other fields are still there.
			name: "bad memory", xml: head + `<gpu id="00000000:18:00.0"><uuid>GPU-1</uuid><fb_memory_usage><total>lots</total></fb_memory_usage>` +
				`<gpu_power_readings><current_power_limit>700.00 W</current_power_limit></gpu_power_readings></gpu></nvidia_smi_log>`,
			wantErr: `GPU 00000000:18:00.0: fb_memory_usage/total "lots"`,
			check: func(r host.GPUReport) bool {
				return len(r.GPUs) == 1 && r.GPUs[0].GetUuid() == "GPU-1" && r.GPUs[0].GetMemoryBytes() == 0 && r.GPUs[0].GetPowerLimitWatts() == 700
			},
		},
		{
			// A bad current limit falls back to the older elements; the id attribute stands in
			// for a missing pci_bus_id.
			name: "bad power limit", xml: head + `<gpu id="00000000:2A:00.0"><gpu_power_readings><current_power_limit>700 mW</current_power_limit></gpu_power_readings>` +
				`<power_readings><power_limit>[N/A]</power_limit></power_readings></gpu></nvidia_smi_log>`,
			wantErr: "current_power_limit",
			check: func(r host.GPUReport) bool {
				return len(r.GPUs) == 1 && r.GPUs[0].GetPciBusId() == "00000000:2A:00.0" && r.GPUs[0].GetPowerLimitWatts() == 0
			},
		},
		{
			// The GPUs disagree on the fabric: the node reports the one that is not done.
			name: "fabric in progress", xml: head + `<gpu><fabric><state>Completed</state><status>Success</status></fabric></gpu>` +
				`<gpu><fabric><state>In Progress</state><status>N/A</status></fabric></gpu>` +
				`<gpu><fabric><state>Not Started</state><status>N/A</status></fabric></gpu></nvidia_smi_log>`,
			check: func(r host.GPUReport) bool {
				return len(r.GPUs) == 3 && r.Driver.GetFabricManagerState() == "In Progress" && r.Driver.GetFabricManagerStatus() == "" &&
					r.GPUs[2].GetIndex() == 2
			},
		},
		{name: "no GPUs", xml: head + `<attached_gpus>0</attached_gpus></nvidia_smi_log>`, check: func(r host.GPUReport) bool {
			return len(r.GPUs) == 0 && r.Driver.GetDriverVersion() == "560.35.03"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := host.ParseNvidiaSMI([]byte(tc.xml))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want one with %q", err, tc.wantErr)
			}
			if tc.check != nil && !tc.check(got) {
				t.Errorf("report %v %v", got.GPUs, got.Driver)
			}
		})
	}
}

func TestSysfsPCIAddress(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"00000000:18:00.0": "0000:18:00.0",
		"00000000:DB:00.0": "0000:db:00.0",
		"00000001:2A:00.0": "0001:2a:00.0",
		"00010000:01:00.0": "10000:01:00.0", // a domain over 16 bits (Intel VMD) is printed in full
		"0000:3b:00.0":     "0000:3b:00.0",  // already as Linux names it
		"":                 "",
		"00000000:../../x": "",
		"N/A":              "",
	} {
		if got := host.SysfsPCIAddress(in); got != want {
			t.Errorf("SysfsPCIAddress(%q) = %q, want %q", in, got, want)
		}
	}
}

// fakeNvidiaSMI writes an nvidia-smi that checks it was asked for -q -x and prints output (or
// fails with exit, as it does without a driver).
func fakeNvidiaSMI(t *testing.T, output string, exit int) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "out.txt")
	if err := os.WriteFile(out, []byte(output), 0o644); err != nil {
		t.Fatal(err)
	}
	return fakeProgram(t, "[ \"$1\" = -q ] && [ \"$2\" = -x ] || { echo bad args \"$@\" >&2; exit 2; }\n"+
		"cat "+out+"\nexit "+strconv.Itoa(exit)+"\n")
}

// fakeProgram writes a shell script with body and returns its path.
func fakeProgram(t *testing.T, body string) string {
	t.Helper()
	script := filepath.Join(t.TempDir(), "nvidia-smi")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

func TestGPUsWithoutNvidiaSMI(t *testing.T) {
	t.Parallel()
	for _, smi := range []string{"-", filepath.Join(t.TempDir(), "not-installed", "nvidia-smi")} {
		got, err := (&host.Inventory{Root: t.TempDir(), NvidiaSMI: smi}).GPUs(t.Context())
		if err != nil || len(got.GPUs) != 0 || got.Driver != nil {
			t.Errorf("%s: %v %v, %v; want no GPUs and no error", smi, got.GPUs, got.Driver, err)
		}
	}
	// Installed, without a GPU: exit status 6.
	got, err := (&host.Inventory{NvidiaSMI: fakeNvidiaSMI(t, "No devices were found\n", 6)}).GPUs(t.Context())
	if err != nil || len(got.GPUs) != 0 {
		t.Errorf("no devices: %v, %v", got.GPUs, err)
	}
	// Installed, without a driver: an error that says what nvidia-smi said.
	_, err = (&host.Inventory{NvidiaSMI: fakeNvidiaSMI(t, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", 9)}).GPUs(t.Context())
	if err == nil || !strings.Contains(err.Error(), "couldn't communicate") {
		t.Errorf("no driver: %v", err)
	}
}

func TestGPUsTimeout(t *testing.T) {
	t.Parallel()
	// A wedged driver: nvidia-smi never answers.
	smi := fakeProgram(t, "exec sleep 60\n")
	inv := &host.Inventory{NvidiaSMI: smi, NvidiaSMITimeout: 200 * time.Millisecond}
	start := time.Now()
	got, err := inv.GPUs(t.Context())
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no answer in") || len(got.GPUs) != 0 {
		t.Errorf("%v, %v; want a timeout", got.GPUs, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %v with a timeout of 200ms", d)
	}
	// Collect reports the rest of the inventory, no GPUs, and why: the GPUs are missing from this
	// report, not gone.
	full, err := (&host.Inventory{Root: fakeRoot(t), NvidiaSMI: smi, NvidiaSMITimeout: 200 * time.Millisecond}).Collect(t.Context())
	if err != nil || len(full.Gpus) != 0 || full.Cpus != 2 || !strings.Contains(full.GetGpuProbeError(), "no answer in") {
		t.Errorf("collect with a wedged nvidia-smi: %v, %v; want no GPUs and the probe's error", full, err)
	}
	// A host without the NVIDIA tools has no GPUs, and no probe error.
	none, err := (&host.Inventory{Root: fakeRoot(t), NvidiaSMI: "-"}).Collect(t.Context())
	if err != nil || len(none.Gpus) != 0 || none.GetGpuProbeError() != "" {
		t.Errorf("collect without nvidia-smi: %v, %v; want no GPUs and no probe error", none, err)
	}
}

func TestGPUsOutputCap(t *testing.T) {
	t.Parallel()
	fixture := readTestdata(t, "nvidia-smi-xml/dgx-h100-8gpu.xml")
	smi := fakeNvidiaSMI(t, string(fixture), 0)
	// Under the cap: read. Over it: refused, not truncated and parsed.
	got, err := (&host.Inventory{NvidiaSMI: smi, NvidiaSMIMaxOutput: int64(len(fixture))}).GPUs(t.Context())
	if err != nil || len(got.GPUs) != 8 {
		t.Errorf("at the cap: %d GPUs, %v", len(got.GPUs), err)
	}
	got, err = (&host.Inventory{NvidiaSMI: smi, NvidiaSMIMaxOutput: int64(len(fixture)) - 1}).GPUs(t.Context())
	if err == nil || !strings.Contains(err.Error(), "output over") || len(got.GPUs) != 0 {
		t.Errorf("over the cap: %d GPUs, %v", len(got.GPUs), err)
	}
	// A program that prints without end is stopped at the cap, not at the timeout.
	endless := fakeProgram(t, "exec yes '<gpu>'\n")
	start := time.Now()
	_, err = (&host.Inventory{NvidiaSMI: endless, NvidiaSMIMaxOutput: 1 << 20, NvidiaSMITimeout: time.Minute}).GPUs(t.Context())
	if err == nil || !strings.Contains(err.Error(), "output over 1048576 bytes") {
		t.Errorf("endless output: %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("endless output stopped after %v", d)
	}
}

func TestGPUsSingleFlight(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runs, release := filepath.Join(dir, "runs"), filepath.Join(dir, "release")
	fixture := filepath.Join(dir, "out.xml")
	if err := os.WriteFile(fixture, readTestdata(t, "nvidia-smi-xml/dgx-h100-8gpu.xml"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Each run says so, then waits for the test to let it answer.
	// (topo -m, which follows, fails at once: links are TestGPUsTopology's.)
	smi := fakeProgram(t, "[ \"$1\" = topo ] && exit 2\necho run >> "+runs+"\nwhile [ ! -e "+release+" ]; do sleep 0.01; done\ncat "+fixture+"\n")
	inv := &host.Inventory{NvidiaSMI: smi, NvidiaSMITimeout: time.Minute}
	const callers = 5
	var wg sync.WaitGroup
	results := make([]host.GPUReport, callers)
	errs := make([]error, callers)
	wg.Go(func() { results[0], errs[0] = inv.GPUs(t.Context()) })
	poll.Until(t, 30*time.Second, "the first run to start", func() bool { _, err := os.Stat(runs); return err == nil })
	for n := 1; n < callers; n++ {
		wg.Go(func() { results[n], errs[n] = inv.GPUs(t.Context()) })
	}
	poll.Until(t, 30*time.Second, "the other callers to wait for the run", func() bool { return inv.ProbeWaiters() == callers-1 })
	// A caller that gives up returns at once, and the run goes on for the others.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := inv.GPUs(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled caller: %v", err)
	}
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for n := range callers {
		if errs[n] != nil || len(results[n].GPUs) != 8 {
			t.Errorf("caller %d: %d GPUs, %v", n, len(results[n].GPUs), errs[n])
		}
	}
	// Each has its own copy.
	results[0].GPUs[0].Model = "changed"
	if results[1].GPUs[0].GetModel() != "NVIDIA H100 80GB HBM3" {
		t.Error("callers share the GPUs they got")
	}
	data, err := os.ReadFile(runs)
	if err != nil || strings.Count(string(data), "run") != 1 {
		t.Errorf("nvidia-smi ran %d times for %d callers (%v)", strings.Count(string(data), "run"), callers, err)
	}
	// Once done, the next call runs it again.
	poll.Until(t, 30*time.Second, "the run to be over", func() bool { return inv.ProbeWaiters() == -1 })
	if got, err := inv.GPUs(t.Context()); err != nil || len(got.GPUs) != 8 {
		t.Errorf("after: %d GPUs, %v", len(got.GPUs), err)
	}
	if data, _ := os.ReadFile(runs); strings.Count(string(data), "run") != 2 {
		t.Errorf("nvidia-smi ran %d times, want 2", strings.Count(string(data), "run"))
	}
}

// TestParseSimulatedNvidiaSMI reads what a simulated machine's nvidia-smi -q -x prints (the
// FakeDaemon's exec, from the simulator's inventory) back into the GPUs it came from: the
// simulator and the parser agree on the format.
func TestParseSimulatedNvidiaSMI(t *testing.T) {
	t.Parallel()
	seen := map[int]bool{}
	for i := 0; i < 200 && len(seen) < 3; i++ {
		inv := sim.Inventory(7, i, "sim")
		if len(inv.GetGpus()) == 0 {
			continue
		}
		seen[len(inv.GetGpus())] = true
		out, _, code := daemon.SimulateExec(inv, "/usr/bin/nvidia-smi", []string{"-q", "-x"})
		got, err := host.ParseNvidiaSMI([]byte(out))
		if err != nil || code != 0 || len(got.GPUs) != len(inv.GetGpus()) {
			t.Fatalf("machine %d: %d GPUs of %d, exit %d, %v", i, len(got.GPUs), len(inv.GetGpus()), code, err)
		}
		for n, want := range inv.GetGpus() {
			want = proto.CloneOf(want)
			want.NumaNode = nil                  // from sysfs, not nvidia-smi
			want.Links, want.NearNics = nil, nil // from nvidia-smi topo -m: TestParseSimulatedNvidiaSMITopo
			if !proto.Equal(got.GPUs[n], want) {
				t.Errorf("machine %d GPU %d:\n got %v\nwant %v", i, n, got.GPUs[n], want)
			}
		}
		if !proto.Equal(got.Driver, inv.GetGpuDriver()) {
			t.Errorf("machine %d: driver %v, want %v", i, got.Driver, inv.GetGpuDriver())
		}
	}
}
