package host_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon/host"
)

// resetGPU is the fourth GPU of testdata/nvidia-smi-xml/dgx-h100-8gpu.xml.
const resetGPU = "GPU-c0ffee11-2233-4455-8677-8899aabbccdd"

// resetSMI writes an nvidia-smi that answers -q -x with the 8-GPU fixture, the process query with
// apps, and --gpu-reset with resetBody (after logging its arguments to the returned log).
func resetSMI(t *testing.T, apps, resetBody string) (smi, log string) {
	t.Helper()
	dir := t.TempDir()
	xml := filepath.Join("testdata", "nvidia-smi-xml", "dgx-h100-8gpu.xml")
	xmlAbs, err := filepath.Abs(xml)
	if err != nil {
		t.Fatal(err)
	}
	appsFile, log := filepath.Join(dir, "apps.csv"), filepath.Join(dir, "reset.log")
	if err := os.WriteFile(appsFile, []byte(apps), 0o644); err != nil {
		t.Fatal(err)
	}
	smi = fakeProgram(t, `case "$1" in
-q) cat `+xmlAbs+` ;;
--query-compute-apps=gpu_uuid,pid,process_name) [ "$2" = --format=csv,noheader ] || exit 2; cat `+appsFile+` ;;
--gpu-reset) echo "$@" >> `+log+`
`+resetBody+` ;;
*) exit 2 ;;
esac
`)
	return smi, log
}

func gpuResetCmd(uuid string) *daemonv1.Command {
	return &daemonv1.Command{Id: "r1", Payload: &daemonv1.Command_GpuReset{GpuReset: &daemonv1.GpuResetPayload{Uuid: uuid}}}
}

func TestGPUResetNotAllowed(t *testing.T) {
	t.Parallel()
	smi, log := resetSMI(t, "", "exit 0")
	c := &host.Commands{GPUs: &host.Inventory{NvidiaSMI: smi}}
	_, err := c.Handlers()[host.CommandGPUReset](t.Context(), gpuResetCmd(resetGPU))
	if err == nil || err.Error() != "gpu reset is not allowed on this node (bcd run --allow-gpu-reset)" {
		t.Errorf("without --allow-gpu-reset: %v", err)
	}
	if _, err := os.Stat(log); err == nil {
		t.Error("reset a GPU without --allow-gpu-reset")
	}
}

func TestGPUResetUnknownGPU(t *testing.T) {
	t.Parallel()
	smi, log := resetSMI(t, "", "exit 0")
	c := &host.Commands{GPUs: &host.Inventory{NvidiaSMI: smi}, AllowGPUReset: true}
	_, err := c.Handlers()[host.CommandGPUReset](t.Context(), gpuResetCmd("GPU-00000000-0000-0000-0000-000000000000"))
	if err == nil || !strings.Contains(err.Error(), "this node has no GPU GPU-00000000") {
		t.Errorf("unknown GPU: %v", err)
	}
	if _, err := os.Stat(log); err == nil {
		t.Error("reset an unknown GPU")
	}
}

func TestGPUResetBusyRefused(t *testing.T) {
	t.Parallel()
	var apps strings.Builder
	apps.WriteString("GPU-9d81b2c4-5e6f-4a7b-8c9d-0e1f2a3b4c52, 99, /usr/bin/other\n")
	for pid := range 10 {
		apps.WriteString(resetGPU + ", " + strconv.Itoa(100+pid) + ", /usr/bin/python3\n")
	}
	smi, log := resetSMI(t, apps.String(), "exit 0")
	c := &host.Commands{GPUs: &host.Inventory{NvidiaSMI: smi}, AllowGPUReset: true}
	_, err := c.Handlers()[host.CommandGPUReset](t.Context(), gpuResetCmd(resetGPU))
	if err == nil || !strings.Contains(err.Error(), "refused: 10 processes use the GPU") ||
		!strings.Contains(err.Error(), "100 /usr/bin/python3") || !strings.Contains(err.Error(), "and 2 more") ||
		strings.Contains(err.Error(), "other") {
		t.Errorf("busy GPU: %v", err)
	}
	if _, err := os.Stat(log); err == nil {
		t.Error("reset a busy GPU")
	}
}

func TestGPUResetSucceeds(t *testing.T) {
	t.Parallel()
	// Another GPU's process does not hold this one.
	smi, log := resetSMI(t, "GPU-9d81b2c4-5e6f-4a7b-8c9d-0e1f2a3b4c52, 99, /usr/bin/other\n",
		"echo GPU 00000000:3A:00.0 was successfully reset.")
	c := &host.Commands{GPUs: &host.Inventory{NvidiaSMI: smi}, AllowGPUReset: true}
	// A draining node still resets.
	c.Drain = &memDrain{on: true}
	out, err := c.Handlers()[host.CommandGPUReset](t.Context(), gpuResetCmd(resetGPU))
	if err != nil || out.GetFields()["uuid"].GetStringValue() != resetGPU || !out.GetFields()["reset"].GetBoolValue() {
		t.Fatalf("reset: %v, %v", out, err)
	}
	got, err := os.ReadFile(log)
	if err != nil || strings.TrimSpace(string(got)) != "--gpu-reset -i "+resetGPU {
		t.Errorf("nvidia-smi was run with %q, %v", got, err)
	}
}

func TestGPUResetFails(t *testing.T) {
	t.Parallel()
	// nvidia-smi's message names the failure; a flood of stderr is bounded in the error.
	smi, _ := resetSMI(t, "", `echo "Unable to reset GPU 00000000:3A:00.0: In use by another client" >&2
head -c 100000 /dev/zero | tr '\0' x >&2
exit 255`)
	c := &host.Commands{GPUs: &host.Inventory{NvidiaSMI: smi}, AllowGPUReset: true}
	_, err := c.Handlers()[host.CommandGPUReset](t.Context(), gpuResetCmd(resetGPU))
	if err == nil || !strings.Contains(err.Error(), "In use by another client") || !strings.Contains(err.Error(), "exit status 255") {
		t.Errorf("failing reset: %v", err)
	}
	if err != nil && len(err.Error()) > 8<<10 {
		t.Errorf("error of %d bytes", len(err.Error()))
	}
}
