package host_test

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/internal/daemon/host"
	"github.com/better-compute/better-compute/internal/gpuhealth"
)

// The health fixtures are constructed from nvidia-smi's documented XML (nvsmi_device_v12.dtd and
// its predecessors), not recorded on a GPU machine: see testdata/nvidia-smi-xml/README.md.

const (
	h100UUID0 = "GPU-3f2a7c1e-8b4d-4e6f-9a0b-1c2d3e4f5a61"
	h100UUID1 = "GPU-9d81b2c4-5e6f-4a7b-8c9d-0e1f2a3b4c52"
)

func TestParseGPUHealth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file string
		want []host.GPUReading
	}{
		{
			// R550: sram_/dram_ ECC, clocks_event_reasons; a narrower link is flagged, a lower
			// generation (GPU 0 at 3 of 5, GPU 1 idle at 1 of 5) is not.
			file: "h100-driver550-health-2gpu.xml",
			want: []host.GPUReading{
				{UUID: h100UUID0, PCIBusID: "00000000:18:00.0", PCIeReplays: 12, Signals: []host.SignalReading{
					{Check: gpuhealth.CheckECCDoubleBit, Count: 2, Detail: "ecc_errors/aggregate: dram_uncorrectable 2"},
					{Check: gpuhealth.CheckECCSingleBit, Count: 15, Detail: "ecc_errors/aggregate: dram_correctable 14, sram_correctable 1"},
					{Check: gpuhealth.CheckRowRemapPending, Count: 1, Detail: "remapped_rows/remapped_row_pending: Yes"},
					{Check: gpuhealth.CheckThermalSlowdown, Count: 1, Detail: "clocks_event_reasons: hw_thermal_slowdown Active"},
					{Check: gpuhealth.CheckPCIeLinkDegraded, Count: 1, Detail: "pci_gpu_link_info/link_widths: current 8x, max 16x"},
				}},
				{UUID: h100UUID1, PCIBusID: "00000000:2A:00.0", PCIeReplays: 0, Signals: []host.SignalReading{
					{Check: gpuhealth.CheckRowRemapFailure, Count: 1, Detail: "remapped_rows/remapped_row_failure: Yes"},
					{Check: gpuhealth.CheckPowerSlowdown, Count: 1, Detail: "clocks_event_reasons: hw_power_brake_slowdown Active"},
				}},
			},
		},
		{
			// R570: sram_uncorrectable split in two, gpu_recovery_action, no replay counter.
			file: "a100-driver570-health-1gpu.xml",
			want: []host.GPUReading{{UUID: "GPU-a1b2c3d4-e5f6-4789-8abc-def012345678", PCIBusID: "00000000:07:00.0", PCIeReplays: -1,
				Signals: []host.SignalReading{
					{Check: gpuhealth.CheckECCDoubleBit, Count: 7, Detail: "ecc_errors/aggregate: dram_uncorrectable 4, sram_uncorrectable_parity 1, sram_uncorrectable_secded 2"},
					{Check: gpuhealth.CheckRecoveryAction, Code: gpuhealth.RecoveryDrainAndReset, Count: 1, Detail: "gpu_recovery_action: Drain and Reset"},
					{Check: gpuhealth.CheckThermalSlowdown, Count: 1, Detail: "clocks_event_reasons: sw_thermal_slowdown Active"},
				}}},
		},
		{
			// R470: single_bit/double_bit totals, pending_blacklist, clocks_throttle_reasons.
			file: "v100-driver470-health-1gpu.xml",
			want: []host.GPUReading{{UUID: "GPU-6b1f0e3d-2c4a-4b5e-8f7d-9a0c1b2d3e4f", PCIBusID: "00000000:3B:00.0", PCIeReplays: 0,
				Signals: []host.SignalReading{
					{Check: gpuhealth.CheckECCDoubleBit, Count: 1, Detail: "ecc_errors/aggregate: double_bit/total 1"},
					{Check: gpuhealth.CheckECCSingleBit, Count: 27, Detail: "ecc_errors/aggregate: single_bit/total 27"},
					{Check: gpuhealth.CheckRetiredPagesPending, Count: 1, Detail: "retired_pages/pending_blacklist: Yes"},
					{Check: gpuhealth.CheckPowerSlowdown, Count: 1, Detail: "clocks_throttle_reasons: hw_power_brake_slowdown Active"},
				}}},
		},
		{
			// "N/A" everywhere is no signal.
			file: "na-fields-2gpu.xml",
		},
	} {
		t.Run(tc.file, func(t *testing.T) {
			t.Parallel()
			got, err := host.ParseNvidiaSMI(readTestdata(t, filepath.Join("nvidia-smi-xml", tc.file)))
			if err != nil {
				t.Fatal(err)
			}
			if tc.want == nil {
				for _, r := range got.Health {
					if len(r.Signals) != 0 {
						t.Errorf("GPU %s: signals %+v, want none", r.UUID, r.Signals)
					}
				}
				return
			}
			if !reflect.DeepEqual(got.Health, tc.want) {
				t.Errorf("health\n got %+v\nwant %+v", got.Health, tc.want)
			}
		})
	}
}

// TestParseGPUHealthHealthy: a healthy node (no ECC section, links at full width) has no
// signals, and one reading per GPU.
func TestParseGPUHealthHealthy(t *testing.T) {
	t.Parallel()
	got, err := host.ParseNvidiaSMI(readTestdata(t, filepath.Join("nvidia-smi-xml", "dgx-h100-8gpu.xml")))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Health) != len(got.GPUs) {
		t.Fatalf("%d readings for %d GPUs", len(got.Health), len(got.GPUs))
	}
	for n, r := range got.Health {
		if r.UUID != got.GPUs[n].Uuid || len(r.Signals) != 0 {
			t.Errorf("reading %d: %+v", n, r)
		}
	}
}

// TestParseGPUHealthOddValues: a count or a recovery action that does not parse is named in the
// error and left out; the rest is read.
func TestParseGPUHealthOddValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, gpu, wantErr string
		want               []host.SignalReading
	}{
		{
			name:    "bad count",
			gpu:     `<ecc_errors><aggregate><dram_uncorrectable>lots</dram_uncorrectable><dram_correctable>3</dram_correctable></aggregate></ecc_errors>`,
			wantErr: `ecc_errors/aggregate/dram_uncorrectable "lots"`,
			want:    []host.SignalReading{{Check: gpuhealth.CheckECCSingleBit, Count: 3, Detail: "ecc_errors/aggregate: dram_correctable 3"}},
		},
		{
			name:    "unknown recovery action",
			gpu:     `<gpu_recovery_action>Pray</gpu_recovery_action><remapped_rows><remapped_row_pending>Yes</remapped_row_pending></remapped_rows>`,
			wantErr: `gpu_recovery_action "Pray"`,
			want:    []host.SignalReading{{Check: gpuhealth.CheckRowRemapPending, Count: 1, Detail: "remapped_rows/remapped_row_pending: Yes"}},
		},
		{
			name: "both retired page elements",
			gpu:  `<retired_pages><pending_blacklist>Yes</pending_blacklist><pending_retirement>Yes</pending_retirement></retired_pages>`,
			want: []host.SignalReading{{Check: gpuhealth.CheckRetiredPagesPending, Count: 1, Detail: "retired_pages/pending_blacklist: Yes"}},
		},
		{
			name: "reboot and a thermal slowdown",
			gpu: `<gpu_recovery_action>Reboot</gpu_recovery_action><temperature><gpu_temp>N/A</gpu_temp></temperature>` +
				`<clocks_event_reasons><clocks_event_reason_hw_thermal_slowdown>Active</clocks_event_reason_hw_thermal_slowdown></clocks_event_reasons>`,
			want: []host.SignalReading{
				{Check: gpuhealth.CheckRecoveryAction, Code: gpuhealth.RecoveryReboot, Count: 1, Detail: "gpu_recovery_action: Reboot"},
				{Check: gpuhealth.CheckThermalSlowdown, Count: 1, Detail: "clocks_event_reasons: hw_thermal_slowdown Active"},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := host.ParseNvidiaSMI([]byte(`<nvidia_smi_log><gpu id="00000000:18:00.0"><uuid>GPU-x</uuid>` + tc.gpu + `</gpu></nvidia_smi_log>`))
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v; want %q", err, tc.wantErr)
			}
			if len(got.Health) != 1 || !reflect.DeepEqual(got.Health[0].Signals, tc.want) {
				t.Errorf("health %+v; want signals %+v", got.Health, tc.want)
			}
		})
	}
}
