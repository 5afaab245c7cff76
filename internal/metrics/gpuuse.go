package metrics

import (
	"slices"
	"time"

	"github.com/better-compute/better-compute/gen/db"
)

// gpuUse is what the leased GPUs of one series did over the window: the sums
// LeasedGPUUtilization reads, added up.
type gpuUse struct {
	utilSum                float64
	utilGPUs               int64
	gpuSeconds, activeSecs int64
}

func (u *gpuUse) add(r db.LeasedGPUUtilizationRow) {
	u.utilSum += r.UtilSum
	u.utilGPUs += r.UtilGpus
	u.gpuSeconds += r.GpuSeconds
	u.activeSecs += r.ActiveGpuSeconds
}

// utilization is the mean utilisation, percent; 0 without a sample.
func (u gpuUse) utilization() float64 {
	if u.utilGPUs == 0 {
		return 0
	}
	return u.utilSum / float64(u.utilGPUs)
}

// activeRatio is the share of the GPU-seconds that were active.
func (u gpuUse) activeRatio() float64 {
	if u.gpuSeconds == 0 {
		return 0
	}
	return float64(u.activeSecs) / float64(u.gpuSeconds)
}

// idleGPUs is the GPUs held but not active, on average over the utilisation window.
func (u gpuUse) idleGPUs() float64 {
	return float64(u.gpuSeconds-u.activeSecs) / utilizationWindow.Seconds()
}

// utilizationWindow is the window of LeasedGPUUtilization.
const utilizationWindow = 5 * time.Minute

// usageByModel emits v of the leased GPUs' use added up by model.
func (c *dbCollector) usageByModel(v func(gpuUse) float64) func(Emit) {
	return func(emit Emit) {
		c.mu.Lock()
		defer c.mu.Unlock()
		byModel := map[string]*gpuUse{}
		var models []string
		for _, r := range c.utilization {
			u := byModel[r.Model]
			if u == nil {
				u = &gpuUse{}
				byModel[r.Model] = u
				models = append(models, r.Model)
			}
			u.add(r)
		}
		slices.Sort(models)
		for _, m := range models {
			emit(v(*byModel[m]), m)
		}
	}
}

// usageByTenant emits v of each tenant's, pool's and model's leased GPUs.
func (c *dbCollector) usageByTenant(v func(gpuUse) float64) func(Emit) {
	return func(emit Emit) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, r := range c.utilization {
			var u gpuUse
			u.add(r)
			emit(v(u), r.TenantID.String(), r.PoolID.String(), r.Model)
		}
	}
}
