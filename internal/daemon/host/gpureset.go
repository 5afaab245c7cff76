package host

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
)

// GPUResetTimeout bounds nvidia-smi --gpu-reset: a reset that works takes seconds (longer on a
// GPU of an NVLink domain, which the driver resets with its peers); one still running after this
// is stuck in the driver.
const GPUResetTimeout = 2 * time.Minute

// maxBusyNamed is how many of the processes holding a GPU a refused reset names.
const maxBusyNamed = 8

// ErrGPUResetNotAllowed is the error of a gpuReset on a node whose daemon runs without
// --allow-gpu-reset.
var ErrGPUResetNotAllowed = errors.New("gpu reset is not allowed on this node (bcd run --allow-gpu-reset)")

// computeAppsQuery lists the processes using each GPU, one "uuid, pid, name" line each.
var computeAppsQuery = []string{"--query-compute-apps=gpu_uuid,pid,process_name", "--format=csv,noheader"}

// gpuReset resets one GPU of the inventory, by UUID, with nvidia-smi --gpu-reset: only with
// AllowGPUReset, and never while a process holds the GPU (the reset would kill its work and
// usually fails anyway). The result is {"uuid": UUID, "reset": true}.
func (c *Commands) gpuReset(ctx context.Context, cmd *daemonv1.Command) (*structpb.Struct, error) {
	if !c.AllowGPUReset {
		return nil, ErrGPUResetNotAllowed
	}
	uuid := cmd.GetGpuReset().GetUuid()
	inv := c.GPUs
	if inv == nil {
		return nil, errors.New("gpuReset: this daemon reads no GPUs")
	}
	prog := inv.nvidiaSMIProgram()
	if prog == "" {
		return nil, fmt.Errorf("gpuReset %s: nvidia-smi is not installed", uuid)
	}
	report, err := inv.GPUs(ctx)
	if err != nil && len(report.GPUs) == 0 {
		return nil, fmt.Errorf("gpuReset %s: list the GPUs: %w", uuid, err)
	}
	if !slices.ContainsFunc(report.GPUs, func(g *daemonv1.Gpu) bool { return g.GetUuid() == uuid }) {
		return nil, fmt.Errorf("gpuReset: this node has no GPU %s", uuid)
	}
	out, err := inv.runNvidiaSMI(ctx, prog, computeAppsQuery)
	if err != nil {
		return nil, fmt.Errorf("gpuReset %s: list the processes using it: %w", uuid, err)
	}
	busy, err := processesOn(out, uuid)
	if err != nil {
		return nil, fmt.Errorf("gpuReset %s: %w", uuid, err)
	}
	if len(busy) > 0 {
		named := busy[:min(len(busy), maxBusyNamed)]
		more := ""
		if len(busy) > len(named) {
			more = fmt.Sprintf(" and %d more", len(busy)-len(named))
		}
		return nil, fmt.Errorf("gpuReset %s: refused: %d processes use the GPU (%s%s); nothing done",
			uuid, len(busy), strings.Join(named, ", "), more)
	}
	c.logger().Warn("resetting a GPU, as a gpuReset command asked", "gpu", uuid)
	if _, err := inv.runNvidiaSMIFor(ctx, prog, []string{"--gpu-reset", "-i", uuid}, GPUResetTimeout); err != nil {
		return nil, fmt.Errorf("gpuReset %s: %w", uuid, err)
	}
	return structpb.NewStruct(map[string]any{"uuid": uuid, "reset": true})
}

// processesOn reads nvidia-smi --query-compute-apps output and returns the processes on the GPU
// uuid, each as "pid NAME". A line it cannot read is an error: a reset is refused rather than
// risked on output it does not understand.
func processesOn(out []byte, uuid string) ([]string, error) {
	var busy []string
	for line := range strings.Lines(string(out)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "No running processes") {
			continue
		}
		f := strings.SplitN(line, ",", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("read nvidia-smi's process list: unexpected line %q", firstLine(line))
		}
		if strings.TrimSpace(f[0]) == uuid {
			busy = append(busy, strings.TrimSpace(f[1])+" "+strings.TrimSpace(f[2]))
		}
	}
	return busy, nil
}
