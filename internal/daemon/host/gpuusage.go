package host

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/metrics"
)

// DefaultGPUUsageInterval is how often the usage sampler runs nvidia-smi: twelve samples a
// minute catch a job that ran for part of it, and one small query (a CSV line per GPU, tens of
// milliseconds) every five seconds costs the node nothing worth counting.
const DefaultGPUUsageInterval = 5 * time.Second

// usageQuery is the nvidia-smi invocation ParseUsageCSV reads: one CSV line per GPU, without
// header or units. name comes last, so that a model name with a comma in it still parses.
var usageQuery = []string{
	"--query-gpu=index,uuid,utilization.gpu,memory.used,memory.total,power.draw,temperature.gpu,name",
	"--format=csv,noheader,nounits",
}

// usageFields is how many fields usageQuery asks for.
const usageFields = 8

// ParseUsageCSV reads the output of nvidia-smi --query-gpu with usageQuery's fields and
// --format=csv,noheader,nounits: one GPU a line. A field the driver does not give ("[N/A]",
// "[Not Supported]") is NaN in the sample. A line that cannot be read (too few fields, no UUID,
// an index or a number that is not one) is left out and named in the error; the others are
// returned with it.
func ParseUsageCSV(out []byte) ([]daemon.GPUSample, error) {
	var samples []daemon.GPUSample
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(out))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		s, err := parseUsageLine(line)
		if err != nil {
			errs = append(errs, fmt.Errorf("nvidia-smi --query-gpu line %d: %w", n, err))
		}
		if s.UUID != "" {
			samples = append(samples, s)
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("nvidia-smi --query-gpu: %w", err))
	}
	return samples, errors.Join(errs...)
}

// parseUsageLine reads one line of usageQuery's output. A sample without a UUID is not one; a
// sample with one comes with the error of the fields it left out as not readings.
func parseUsageLine(line string) (daemon.GPUSample, error) {
	f := strings.SplitN(line, ",", usageFields)
	if len(f) < usageFields-1 {
		return daemon.GPUSample{}, fmt.Errorf("%d fields, want %d", len(f), usageFields)
	}
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	idx, err := strconv.ParseInt(f[0], 10, 32)
	if err != nil || idx < 0 {
		return daemon.GPUSample{}, fmt.Errorf("index %q is not one", f[0])
	}
	s := daemon.GPUSample{Index: int32(idx), UUID: value(f[1])}
	if s.UUID == "" {
		return daemon.GPUSample{}, errors.New("no UUID")
	}
	if len(f) == usageFields {
		s.Name = value(f[7])
	}
	var errs []error
	for _, m := range []struct {
		name   string
		v      string
		to     *float64
		lo, hi float64
	}{
		{"utilization.gpu", f[2], &s.UtilPercent, 0, 100},
		{"memory.used", f[3], &s.MemoryUsedMiB, 0, math.Inf(1)},
		{"memory.total", f[4], &s.MemoryTotalMiB, 0, math.Inf(1)},
		{"power.draw", f[5], &s.PowerWatts, 0, math.Inf(1)},
		{"temperature.gpu", f[6], &s.TemperatureC, -273, math.Inf(1)},
	} {
		*m.to = math.NaN()
		v := value(m.v)
		if v == "" {
			continue
		}
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) || x < m.lo || x > m.hi {
			errs = append(errs, fmt.Errorf("%s %q is not a reading", m.name, m.v))
			continue
		}
		*m.to = x
	}
	// A value that is not a reading is left out like one not given, and named in the error:
	// the rest of the GPU's sample still counts.
	return s, errors.Join(errs...)
}

// QueryUsage runs nvidia-smi's usage query (bounded: timeout, DefaultNvidiaSMITimeout when 0,
// and the output cap of runNvidiaSMI) and parses it. A host without nvidia-smi or GPUs has no
// samples and no error.
func (i *Inventory) QueryUsage(ctx context.Context, timeout time.Duration) ([]daemon.GPUSample, error) {
	prog := i.nvidiaSMIProgram()
	if prog == "" {
		return nil, nil
	}
	out, err := i.runNvidiaSMIFor(ctx, prog, usageQuery, timeout)
	if errors.Is(err, errNoNvidiaGPUs) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ParseUsageCSV(out)
}

// UsageProbeTimeout is how long one usage query may take with samples every interval: less
// than the interval (four fifths of it), so that probes never pile up, and never more than
// DefaultNvidiaSMITimeout.
func UsageProbeTimeout(interval time.Duration) time.Duration {
	return min(interval*4/5, DefaultNvidiaSMITimeout)
}

// GPUUsageSampler samples the node's GPU usage every Interval and, when a wall-clock minute
// has ended, queues its summary (daemon.GPUUsageAggregator) on Feed for the agent to send. It
// keeps the latest samples for the local metrics endpoint. Its methods are safe for concurrent
// use.
type GPUUsageSampler struct {
	Feed *daemon.GPUUsageFeed
	// Query reads the GPUs once: Inventory.QueryUsage with UsageProbeTimeout(Interval).
	Query func(context.Context) ([]daemon.GPUSample, error)
	// Interval is the time between samples; DefaultGPUUsageInterval when 0.
	Interval time.Duration
	// Now is the clock; time.Now when nil.
	Now    func() time.Time
	Logger *slog.Logger

	mu      sync.Mutex
	agg     daemon.GPUUsageAggregator
	latest  []daemon.GPUSample
	failing bool
}

// NewGPUUsageSampler is the sampler of a node: querying through inv every interval, queueing
// on feed.
func NewGPUUsageSampler(inv *Inventory, feed *daemon.GPUUsageFeed, interval time.Duration, log *slog.Logger) *GPUUsageSampler {
	if interval <= 0 {
		interval = DefaultGPUUsageInterval
	}
	timeout := UsageProbeTimeout(interval)
	return &GPUUsageSampler{
		Feed: feed, Interval: interval, Logger: log,
		Query: func(ctx context.Context) ([]daemon.GPUSample, error) { return inv.QueryUsage(ctx, timeout) },
	}
}

// Run samples at once and every Interval until ctx ends. The minute under way when ctx ends is
// not sent: it is not over.
func (s *GPUUsageSampler) Run(ctx context.Context) {
	tick := time.NewTicker(s.interval())
	defer tick.Stop()
	for {
		s.Sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Sample queries the GPUs once and folds the samples into the minute's summary; when the
// minute before has ended, its GpuUsage is queued on Feed. A query that fails (logged once
// until one reads) still ends the minute on time. A query cut short by ctx changes nothing.
func (s *GPUUsageSampler) Sample(ctx context.Context) {
	samples, err := s.Query(ctx)
	if ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.agg.Interval = s.interval()
	now := s.now()
	switch {
	case err != nil && len(samples) == 0:
		if !s.failing {
			s.logger().Warn("GPU usage: nvidia-smi query failed", "err", err)
		}
		s.failing = true
		s.latest = nil
		s.publish(s.agg.Roll(now))
		return
	case err != nil:
		s.logger().Debug("GPU usage: some nvidia-smi lines not read", "err", err)
	}
	if s.failing {
		s.logger().Info("GPU usage: nvidia-smi query reads again")
	}
	s.failing = false
	s.latest = samples
	if len(samples) == 0 {
		// No GPUs: nothing to summarise, but a minute with samples before still ends.
		s.publish(s.agg.Roll(now))
		return
	}
	s.publish(s.agg.Add(now, samples))
}

func (s *GPUUsageSampler) publish(u *daemonv1.GpuUsage) {
	if u == nil || s.Feed == nil {
		return
	}
	if s.Feed.Publish(u) {
		s.logger().Warn("GPU usage: no session for a while; the oldest minute was dropped",
			"kept", daemon.MaxGPUUsageBacklog, "dropped_total", s.Feed.Dropped())
	}
}

// Latest is a copy of the samples the last query read: nil before it, or when it failed.
func (s *GPUUsageSampler) Latest() []daemon.GPUSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]daemon.GPUSample(nil), s.latest...)
}

func (s *GPUUsageSampler) interval() time.Duration {
	if s.Interval <= 0 {
		return DefaultGPUUsageInterval
	}
	return s.Interval
}

func (s *GPUUsageSampler) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *GPUUsageSampler) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// The metric names and labels of NVIDIA's dcgm-exporter (its default-counters.csv), so that
// dashboards and alerts written for it read bcd's endpoint unchanged. Only the four fields
// nvidia-smi's usage query gives are served.
const (
	DCGMGPUUtil    = "DCGM_FI_DEV_GPU_UTIL"
	DCGMFBUsed     = "DCGM_FI_DEV_FB_USED"
	DCGMPowerUsage = "DCGM_FI_DEV_POWER_USAGE"
	DCGMGPUTemp    = "DCGM_FI_DEV_GPU_TEMP"
)

// dcgmLabels are dcgm-exporter's labels of a GPU's series, in this order.
var dcgmLabels = []string{"gpu", "UUID", "modelName", "Hostname"}

// DCGMRegistry is a metrics registry that serves the latest samples (latest, read at each
// scrape) under dcgm-exporter's names and labels, with Hostname hostname. A metric a GPU's
// sample does not give is left out of that GPU's series.
func DCGMRegistry(hostname string, latest func() []daemon.GPUSample) *metrics.Registry {
	r := metrics.NewRegistry()
	for _, m := range []struct {
		name, help string
		v          func(daemon.GPUSample) float64
	}{
		{DCGMGPUUtil, "GPU utilization (in %).", func(s daemon.GPUSample) float64 { return s.UtilPercent }},
		{DCGMFBUsed, "Framebuffer memory used (in MiB).", func(s daemon.GPUSample) float64 { return s.MemoryUsedMiB }},
		{DCGMPowerUsage, "Power draw (in W).", func(s daemon.GPUSample) float64 { return s.PowerWatts }},
		{DCGMGPUTemp, "GPU temperature (in C).", func(s daemon.GPUSample) float64 { return s.TemperatureC }},
	} {
		r.Func(m.name, m.help, metrics.TypeGauge, dcgmLabels, func(emit metrics.Emit) {
			for _, s := range latest() {
				if v := m.v(s); !math.IsNaN(v) {
					emit(v, strconv.Itoa(int(s.Index)), s.UUID, s.Name, hostname)
				}
			}
		})
	}
	return r
}

// ServeGPUMetrics serves reg at GET /metrics on addr (--gpu-metrics-listen) until ctx ends.
// It returns once listening, or the error of listening; the server stops with ctx.
func ServeGPUMetrics(ctx context.Context, addr string, reg *metrics.Registry, log *slog.Logger) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("--gpu-metrics-listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", reg.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && log != nil {
			log.Warn("GPU metrics endpoint stopped", "addr", addr, "err", err)
		}
	}()
	return nil
}
