package host

import (
	"encoding/xml"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/better-compute/better-compute/internal/gpuhealth"
)

// GPUReading is what one nvidia-smi -q -x run says of one GPU's health (docs/gpus.md,
// "Signals"): the signals it shows, without times, which the collector (GPUHealth) dates and
// keeps. It holds plain values only, so a copy of it is a copy.
type GPUReading struct {
	// UUID and PCIBusID name the GPU, as nvidia-smi prints them.
	UUID     string
	PCIBusID string
	// Signals are the conditions that hold (Count 1) and the ECC counts that are not 0
	// (aggregate, over the GPU's life), in a fixed order; never pcie_replays, which is growth
	// since the collector started and so the collector's to count (PCIeReplays).
	Signals []SignalReading
	// PCIeReplays is pci/replay_counter; -1 when nvidia-smi does not give it.
	PCIeReplays int64
}

// SignalReading is one signal as a single read shows it: a gpuhealth check with its code, count
// and what nvidia-smi said, without times.
type SignalReading struct {
	Check  string
	Code   int64
	Count  int64
	Detail string
}

// smiHealth is the part of a gpu element the health signals read. It is embedded in smiGPU, so
// one parse of nvidia-smi's output gives the inventory and the health.
type smiHealth struct {
	ECC smiECC `xml:"ecc_errors>aggregate"`
	// pending_blacklist before about R450, pending_retirement after.
	PendingBlacklist  string `xml:"retired_pages>pending_blacklist"`
	PendingRetirement string `xml:"retired_pages>pending_retirement"`
	RowRemapPending   string `xml:"remapped_rows>remapped_row_pending"`
	RowRemapFailure   string `xml:"remapped_rows>remapped_row_failure"`
	// clocks_event_reasons since about R535, clocks_throttle_reasons before.
	EventReasons    smiReasons `xml:"clocks_event_reasons"`
	ThrottleReasons smiReasons `xml:"clocks_throttle_reasons"`
	ReplayCounter   string     `xml:"pci>replay_counter"`
	MaxLinkWidth    string     `xml:"pci>pci_gpu_link_info>link_widths>max_link_width"`
	LinkWidth       string     `xml:"pci>pci_gpu_link_info>link_widths>current_link_width"`
	// gpu_recovery_action: drivers since about R570.
	RecoveryAction string `xml:"gpu_recovery_action"`
}

// smiECC is ecc_errors/aggregate in the three layouts nvidia-smi has used: single_bit/total and
// double_bit/total (DTD v11 and before); sram_/dram_correctable and _uncorrectable (v12);
// sram_uncorrectable split into _parity and _secded (drivers since about R570).
type smiECC struct {
	SingleBitTotal          string `xml:"single_bit>total"`
	DoubleBitTotal          string `xml:"double_bit>total"`
	DRAMCorrectable         string `xml:"dram_correctable"`
	SRAMCorrectable         string `xml:"sram_correctable"`
	DRAMUncorrectable       string `xml:"dram_uncorrectable"`
	SRAMUncorrectable       string `xml:"sram_uncorrectable"`
	SRAMUncorrectableParity string `xml:"sram_uncorrectable_parity"`
	SRAMUncorrectableSECDED string `xml:"sram_uncorrectable_secded"`
}

// smiReasons is clocks_event_reasons or clocks_throttle_reasons: elements named
// clocks_event_reason_X or clocks_throttle_reason_X, each "Active" or "Not Active".
type smiReasons struct {
	Reasons []struct {
		XMLName xml.Name
		Value   string `xml:",chardata"`
	} `xml:",any"`
}

// active reports whether the reason named (hw_thermal_slowdown) is "Active".
func (r smiReasons) active(reason string) bool {
	for _, x := range r.Reasons {
		if strings.HasSuffix(x.XMLName.Local, "_reason_"+reason) && strings.EqualFold(value(x.Value), "Active") {
			return true
		}
	}
	return false
}

// reading turns the health elements of one GPU into its signals. A value that should be a
// number and is not is left out and named in the errors; the rest is still read.
func (h smiHealth) reading(uuid, pciBusID string) (GPUReading, []error) {
	r := GPUReading{UUID: uuid, PCIBusID: pciBusID, PCIeReplays: -1}
	var errs []error
	count := func(field, v string) int64 {
		n, err := counter(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", field, v, err))
		}
		return n
	}
	add := func(check string, code, n int64, detail string) {
		r.Signals = append(r.Signals, SignalReading{Check: check, Code: code, Count: n, Detail: detail})
	}
	for _, ecc := range []struct {
		check string
		parts []eccPart
	}{
		{gpuhealth.CheckECCDoubleBit, []eccPart{
			{"double_bit/total", h.ECC.DoubleBitTotal}, {"dram_uncorrectable", h.ECC.DRAMUncorrectable},
			{"sram_uncorrectable", h.ECC.SRAMUncorrectable}, {"sram_uncorrectable_parity", h.ECC.SRAMUncorrectableParity},
			{"sram_uncorrectable_secded", h.ECC.SRAMUncorrectableSECDED},
		}},
		{gpuhealth.CheckECCSingleBit, []eccPart{
			{"single_bit/total", h.ECC.SingleBitTotal}, {"dram_correctable", h.ECC.DRAMCorrectable},
			{"sram_correctable", h.ECC.SRAMCorrectable},
		}},
	} {
		var total int64
		var said []string
		for _, p := range ecc.parts {
			if n := count("ecc_errors/aggregate/"+p.field, p.v); n > 0 {
				total += n
				said = append(said, fmt.Sprintf("%s %d", p.field, n))
			}
		}
		if total > 0 {
			add(ecc.check, 0, total, "ecc_errors/aggregate: "+strings.Join(said, ", "))
		}
	}
	for _, c := range []struct{ check, field, v string }{
		{gpuhealth.CheckRetiredPagesPending, "retired_pages/pending_blacklist", h.PendingBlacklist},
		{gpuhealth.CheckRetiredPagesPending, "retired_pages/pending_retirement", h.PendingRetirement},
		{gpuhealth.CheckRowRemapPending, "remapped_rows/remapped_row_pending", h.RowRemapPending},
		{gpuhealth.CheckRowRemapFailure, "remapped_rows/remapped_row_failure", h.RowRemapFailure},
	} {
		if strings.EqualFold(value(c.v), "Yes") && (len(r.Signals) == 0 || r.Signals[len(r.Signals)-1].Check != c.check) {
			add(c.check, 0, 1, c.field+": Yes")
		}
	}
	if action, err := recoveryAction(value(h.RecoveryAction)); err != nil {
		errs = append(errs, fmt.Errorf("gpu_recovery_action %q: %w", h.RecoveryAction, err))
	} else if action != gpuhealth.RecoveryNone {
		add(gpuhealth.CheckRecoveryAction, action, 1, "gpu_recovery_action: "+value(h.RecoveryAction))
	}
	reasons, element := h.EventReasons, "clocks_event_reasons"
	if len(reasons.Reasons) == 0 {
		reasons, element = h.ThrottleReasons, "clocks_throttle_reasons"
	}
	var thermal []string
	for _, reason := range []string{"hw_thermal_slowdown", "sw_thermal_slowdown"} {
		if reasons.active(reason) {
			thermal = append(thermal, reason+" Active")
		}
	}
	// No temperature in the signal: it moves all the time, and a snapshot that changes with it
	// would be sent, stored and reconciled again and again while the slowdown lasts.
	if len(thermal) > 0 {
		add(gpuhealth.CheckThermalSlowdown, 0, 1, element+": "+strings.Join(thermal, ", "))
	}
	if reasons.active("hw_power_brake_slowdown") {
		add(gpuhealth.CheckPowerSlowdown, 0, 1, element+": hw_power_brake_slowdown Active")
	}
	// The link's width only: a GPU lowers its link generation when idle to save power, so a
	// current generation below the maximum is no fault; a narrower link is (a bad riser, slot or
	// retimer) and does not come back by itself.
	if width, maxWidth := linkWidth(h.LinkWidth), linkWidth(h.MaxLinkWidth); width > 0 && width < maxWidth {
		add(gpuhealth.CheckPCIeLinkDegraded, 0, 1, fmt.Sprintf("pci_gpu_link_info/link_widths: current %dx, max %dx", width, maxWidth))
	}
	if v := value(h.ReplayCounter); v != "" {
		r.PCIeReplays = count("pci/replay_counter", v)
	}
	return r, errs
}

// eccPart is one element of ecc_errors/aggregate and its text.
type eccPart struct{ field, v string }

// counter parses a count nvidia-smi prints ("12"); 0 for an absent one ("N/A").
func counter(s string) (int64, error) {
	v := value(s)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, errors.New("not a count")
	}
	return n, nil
}

// linkWidth parses a PCIe link width ("16x"); 0 when absent or not one.
func linkWidth(s string) int64 {
	n, err := strconv.ParseInt(strings.TrimSuffix(strings.ToLower(value(s)), "x"), 10, 32)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// recoveryAction maps gpu_recovery_action's text ("None", "Reset", "Reboot", "Drain P2P",
// "Drain and Reset"; NVML's nvmlDeviceGpuRecoveryAction_t) to the gpuhealth code. An empty text
// is none.
func recoveryAction(s string) (int64, error) {
	norm := strings.NewReplacer(" ", "", "_", "", "-", "").Replace(strings.ToLower(s))
	switch {
	case norm == "":
		return gpuhealth.RecoveryNone, nil
	case strings.Contains(norm, "drain") && strings.Contains(norm, "reset"):
		return gpuhealth.RecoveryDrainAndReset, nil
	case strings.Contains(norm, "p2p"):
		return gpuhealth.RecoveryDrainP2P, nil
	case strings.Contains(norm, "reboot"):
		return gpuhealth.RecoveryReboot, nil
	case strings.Contains(norm, "reset"):
		return gpuhealth.RecoveryReset, nil
	}
	return gpuhealth.RecoveryNone, errors.New("not a recovery action")
}
