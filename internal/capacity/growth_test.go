package capacity_test

import (
	"testing"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/capacity"
)

func TestGrowthFits(t *testing.T) {
	t.Parallel()
	gpu := db.PoolGrowth{GpuModel: "H100", Gpus: 8, Cpus: 96, MemoryBytes: 1 << 40, Machines: 3}
	cpu := db.PoolGrowth{Cpus: 8, MemoryBytes: 32 << 30, Machines: 2}
	for _, tc := range []struct {
		name   string
		g      db.PoolGrowth
		model  string
		gpus   int32
		cpus   int32
		memory int64
		want   bool
	}{
		{"gpus of the model, any", gpu, "", 12, 0, 0, true},
		{"gpus of the model, named", gpu, "H100", 24, 0, 0, true},
		{"more gpus than all machines", gpu, "", 25, 0, 0, false},
		{"another model", gpu, "A100", 1, 0, 0, false},
		{"gpus of a cpu class", cpu, "", 1, 0, 0, false},
		{"cpus on one machine", cpu, "", 0, 8, 32 << 30, true},
		{"more cpus than a machine", cpu, "", 0, 9, 0, false},
		{"more memory than a machine", cpu, "", 0, 1, 33 << 30, false},
		{"no machines", db.PoolGrowth{Cpus: 8}, "", 0, 1, 0, false},
	} {
		if _, got := capacity.GrowthFits(tc.g, tc.model, tc.gpus, tc.cpus, tc.memory); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
