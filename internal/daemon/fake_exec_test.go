package daemon

import (
	"strings"
	"testing"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
)

// TestFakeExecSimulatesPrograms checks that well-known programs answer with output from the
// machine's inventory, marked as simulated, and that others succeed silently or fail as false.
func TestFakeExecSimulatesPrograms(t *testing.T) {
	t.Parallel()
	inv := &daemonv1.Inventory{Hostname: "sim-7", Cpus: 64, MemoryBytes: 512 << 30,
		Gpus: []*daemonv1.Gpu{{Index: 0, Model: "NVIDIA H100 80GB HBM3", MemoryBytes: 80 << 30, Uuid: "GPU-1"}}}
	for _, tc := range []struct {
		path   string
		args   []string
		stdout string
		code   int
	}{
		{"/usr/bin/nvidia-smi", []string{"-L"}, "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n", 0},
		{"/usr/bin/hostname", nil, "sim-7\n", 0},
		{"/usr/bin/nproc", nil, "64\n", 0},
		{"/bin/echo", []string{"hello", "world"}, "hello world\n", 0},
		{"/usr/local/bin/train", nil, "", 0},
		{"/bin/false", nil, "", 1},
	} {
		stdout, _, code := SimulateExec(inv, tc.path, tc.args)
		if stdout != tc.stdout || code != tc.code {
			t.Errorf("%s %v = %q, %d; want %q, %d", tc.path, tc.args, stdout, code, tc.stdout, tc.code)
		}
	}
	if out, _, _ := SimulateExec(inv, "/usr/bin/nvidia-smi", nil); !strings.Contains(out, "simulated") || !strings.Contains(out, "81920MiB") {
		t.Errorf("nvidia-smi table:\n%s", out)
	}
}
