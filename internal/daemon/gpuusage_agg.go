package daemon

import (
	"cmp"
	"math"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
)

// GPUSample is one reading of one GPU's usage (bcd's nvidia-smi query, a FakeDaemon's load
// profile). A metric the source did not give is NaN, and is left out of the summaries.
type GPUSample struct {
	Index int32
	UUID  string
	// Name is the GPU's model ("NVIDIA H100 80GB HBM3"); empty when not read.
	Name string
	// UtilPercent is utilization.gpu, 0 to 100.
	UtilPercent float64
	// MemoryUsedMiB and MemoryTotalMiB are the device memory in use and in all, MiB.
	MemoryUsedMiB  float64
	MemoryTotalMiB float64
	// PowerWatts is the power draw.
	PowerWatts float64
	// TemperatureC is the GPU's temperature, degrees Celsius.
	TemperatureC float64
}

// GPUUsageAggregator folds samples into per-GPU summaries of one wall-clock minute (UTC) and
// hands out a GpuUsage when a minute ends. It is not safe for concurrent use.
type GPUUsageAggregator struct {
	// Interval is the sampling interval, reported in each GpuUsage and counted per active
	// sample in active_seconds.
	Interval time.Duration

	minute time.Time // the minute being summarised; zero before the first sample
	gpus   map[string]*gpuMinute
}

// gpuMinute is one GPU's running summary.
type gpuMinute struct {
	index       int32
	samples     int32
	util        stat
	active      int32 // samples at or above GPUActiveUtilPercent
	memUsed     stat
	memTotal    stat
	power       stat
	temperature stat
}

// stat is the count, sum, least and greatest of the values given (NaN ones skipped).
type stat struct {
	n             int
	sum, min, max float64
}

func (s *stat) add(v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	if s.n == 0 || v < s.min {
		s.min = v
	}
	if s.n == 0 || v > s.max {
		s.max = v
	}
	s.n++
	s.sum += v
}

// Add folds the samples taken at t into the summary of t's minute. When t is in a later minute
// than the samples before, that minute has ended: its GpuUsage is returned (else nil), and the
// new minute starts with these samples. A sample without a UUID is skipped; without samples, Add
// only ends the minute (Roll).
func (a *GPUUsageAggregator) Add(t time.Time, samples []GPUSample) *daemonv1.GpuUsage {
	ended := a.Roll(t)
	if len(samples) == 0 {
		return ended
	}
	if a.minute.IsZero() {
		a.minute = t.UTC().Truncate(time.Minute)
	}
	if a.gpus == nil {
		a.gpus = map[string]*gpuMinute{}
	}
	for _, s := range samples {
		if s.UUID == "" {
			continue
		}
		g := a.gpus[s.UUID]
		if g == nil {
			g = &gpuMinute{}
			a.gpus[s.UUID] = g
		}
		g.index = s.Index
		g.samples++
		g.util.add(s.UtilPercent)
		if !math.IsNaN(s.UtilPercent) && s.UtilPercent >= GPUActiveUtilPercent {
			g.active++
		}
		g.memUsed.add(s.MemoryUsedMiB)
		g.memTotal.add(s.MemoryTotalMiB)
		g.power.add(s.PowerWatts)
		g.temperature.add(s.TemperatureC)
	}
	return ended
}

// Roll ends the minute being summarised when t is in a later one, returning its GpuUsage (nil
// when t is in the same minute, or no sample came since the last). Call it when a probe failed,
// so that the minute is still sent on time.
func (a *GPUUsageAggregator) Roll(t time.Time) *daemonv1.GpuUsage {
	if a.minute.IsZero() || !t.UTC().Truncate(time.Minute).After(a.minute) {
		return nil
	}
	return a.Flush()
}

// Flush ends the minute being summarised now, whatever the time, and returns its GpuUsage; nil
// when no sample came since the last.
func (a *GPUUsageAggregator) Flush() *daemonv1.GpuUsage {
	if a.minute.IsZero() || len(a.gpus) == 0 {
		a.minute, a.gpus = time.Time{}, nil
		return nil
	}
	u := &daemonv1.GpuUsage{Minute: timestamppb.New(a.minute), Interval: durationpb.New(a.Interval)}
	for uuid, g := range a.gpus {
		u.Gpus = append(u.Gpus, g.summary(uuid, a.Interval))
	}
	slices.SortFunc(u.Gpus, func(x, y *daemonv1.GpuUsageSummary) int {
		return cmp.Or(cmp.Compare(x.GetIndex(), y.GetIndex()), cmp.Compare(x.GetUuid(), y.GetUuid()))
	})
	if len(u.Gpus) > MaxGPUUsageGPUs {
		u.Gpus = u.Gpus[:MaxGPUUsageGPUs]
	}
	a.minute, a.gpus = time.Time{}, nil
	return u
}

// summary is the GPU's GpuUsageSummary: a metric with no value in the minute is left unset.
func (g *gpuMinute) summary(uuid string, interval time.Duration) *daemonv1.GpuUsageSummary {
	s := &daemonv1.GpuUsageSummary{Uuid: uuid, Index: g.index, Samples: g.samples}
	if g.util.n > 0 {
		s.UtilMin = proto.Float32(float32(g.util.min))
		s.UtilMean = proto.Float32(float32(g.util.sum / float64(g.util.n)))
		s.UtilMax = proto.Float32(float32(g.util.max))
		active := min(time.Duration(g.active)*interval, time.Minute)
		s.ActiveSeconds = proto.Int32(int32(active / time.Second))
	}
	if g.memUsed.n > 0 {
		s.MemoryUsedMaxBytes = proto.Uint64(mib(g.memUsed.max))
	}
	if g.memTotal.n > 0 {
		s.MemoryTotalBytes = proto.Uint64(mib(g.memTotal.max))
	}
	if g.power.n > 0 {
		s.PowerMeanWatts = proto.Float32(float32(g.power.sum / float64(g.power.n)))
		s.PowerMaxWatts = proto.Float32(float32(g.power.max))
	}
	if g.temperature.n > 0 {
		s.TemperatureMaxC = proto.Float32(float32(g.temperature.max))
	}
	return s
}

// mib is v MiB in bytes (0 for a negative v).
func mib(v float64) uint64 {
	if v <= 0 {
		return 0
	}
	return uint64(math.Round(v * (1 << 20)))
}
