package capacity

import "github.com/better-compute/better-compute/gen/db"

// GrowthFits reports whether a lease fits the machines a pool can grow by (pool_growth): GPUs
// of the machine's model (model empty means any, the machine's), at most what all the
// machines the pool may have hold; or CPUs and memory that one machine holds. It returns the
// GPU model the lease would run on. leases/create and the placer ask it before refusing a lease
// the pool's current members cannot hold, so a scaled pool takes the lease and grows.
func GrowthFits(g db.PoolGrowth, model string, gpus, cpus int32, memory int64) (string, bool) {
	if g.Machines <= 0 {
		return "", false
	}
	if gpus > 0 {
		if g.Gpus == 0 || (model != "" && model != g.GpuModel) {
			return "", false
		}
		return g.GpuModel, int64(gpus) <= int64(g.Gpus)*int64(g.Machines)
	}
	return "", cpus <= g.Cpus && memory <= g.MemoryBytes
}
