package host

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/better-compute/better-compute/internal/daemon"
)

func readUsageFixture(t *testing.T, name string) []daemon.GPUSample {
	t.Helper()
	out, err := os.ReadFile("testdata/nvidia-smi-query/" + name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseUsageCSV(out)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

// TestParseUsageCSV reads the fixtures: every GPU, every field, and [N/A] / [Not Supported] as
// NaN (left out), never as 0.
func TestParseUsageCSV(t *testing.T) {
	t.Parallel()
	busy := readUsageFixture(t, "h100x8-busy.csv")
	if len(busy) != 8 {
		t.Fatalf("busy: %d GPUs", len(busy))
	}
	g := busy[0]
	if g.Index != 0 || g.UUID != "GPU-4a1c8b2e-6f0d-3e2a-9b7c-1d5e8f2a6c01" || g.Name != "NVIDIA H100 80GB HBM3" ||
		g.UtilPercent != 100 || g.MemoryUsedMiB != 74213 || g.MemoryTotalMiB != 81559 || g.PowerWatts != 688.42 || g.TemperatureC != 64 {
		t.Errorf("busy GPU 0: %+v", g)
	}
	if busy[7].Index != 7 || busy[7].UtilPercent != 95 {
		t.Errorf("busy GPU 7: %+v", busy[7])
	}
	idle := readUsageFixture(t, "h100x8-idle.csv")
	for _, g := range idle {
		if g.UtilPercent != 0 || g.MemoryUsedMiB != 4 {
			t.Errorf("idle: %+v", g)
		}
	}
	na := readUsageFixture(t, "h100x8-power-na.csv")
	for i, g := range na {
		wantNaN := i == 2 || i == 5
		if math.IsNaN(g.PowerWatts) != wantNaN {
			t.Errorf("power-na GPU %d: power %v", i, g.PowerWatts)
		}
		if math.IsNaN(g.UtilPercent) != (i == 7) {
			t.Errorf("power-na GPU %d: util %v", i, g.UtilPercent)
		}
	}
}

// TestParseUsageCSVBadLines: a line without a UUID or index is left out and named; a number that
// is not a reading is left out of its GPU's sample, which is kept.
func TestParseUsageCSVBadLines(t *testing.T) {
	t.Parallel()
	out := "0, GPU-a, 50, 10, 100, 70.5, 40, NVIDIA X\n" +
		"x, GPU-b, 50, 10, 100, 70.5, 40, NVIDIA X\n" +
		"2, [N/A], 50, 10, 100, 70.5, 40, NVIDIA X\n" +
		"3, GPU-d, 150, 10, 100, hot, 40, NVIDIA X\n" +
		"4, GPU-e\n" +
		"5, GPU-f, 1, 2, 3, 4, 5, NVIDIA A, B\n"
	s, err := ParseUsageCSV([]byte(out))
	if err == nil || !strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "line 3") ||
		!strings.Contains(err.Error(), "line 5") || !strings.Contains(err.Error(), "power.draw") {
		t.Errorf("err %v", err)
	}
	if len(s) != 3 || s[0].UUID != "GPU-a" || s[1].UUID != "GPU-d" || s[2].UUID != "GPU-f" {
		t.Fatalf("samples %+v", s)
	}
	if !math.IsNaN(s[1].UtilPercent) || !math.IsNaN(s[1].PowerWatts) || s[1].TemperatureC != 40 {
		t.Errorf("GPU-d %+v", s[1])
	}
	if s[2].Name != "NVIDIA A, B" {
		t.Errorf("a name with a comma: %q", s[2].Name)
	}
}

// TestGPUUsageSamplerMinute samples a known series over one minute and checks the summary the
// next minute's first sample sends, exactly.
func TestGPUUsageSamplerMinute(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	now := start
	utils := []float64{0, 2, 4, 5, 50, 100, 100, 90, 10, 3, 0, 60} // 12 samples, 5s apart
	i := 0
	feed := &daemon.GPUUsageFeed{}
	s := &GPUUsageSampler{
		Feed: feed, Interval: 5 * time.Second, Now: func() time.Time { return now },
		Query: func(context.Context) ([]daemon.GPUSample, error) {
			u := 0.0
			if i < len(utils) {
				u = utils[i]
			}
			power := 100 + float64(i)*10
			if i == 3 {
				power = math.NaN()
			}
			i++
			return []daemon.GPUSample{{Index: 0, UUID: "GPU-a", UtilPercent: u, MemoryUsedMiB: float64(1000 * i),
				MemoryTotalMiB: 81559, PowerWatts: power, TemperatureC: 30 + float64(i)}}, nil
		},
	}
	ctx := t.Context()
	for range utils {
		s.Sample(ctx)
		now = now.Add(5 * time.Second)
	}
	if p := feed.Pending(); len(p) != 0 {
		t.Fatalf("a minute sent before it ended: %v", p)
	}
	if got := s.Latest(); len(got) != 1 || got[0].UtilPercent != 60 {
		t.Errorf("latest %+v", got)
	}
	s.Sample(ctx) // 10:01:00: the minute 10:00 has ended
	p := feed.Pending()
	if len(p) != 1 {
		t.Fatalf("pending %d", len(p))
	}
	u := p[0]
	if !u.GetMinute().AsTime().Equal(start) || u.GetInterval().AsDuration() != 5*time.Second || len(u.GetGpus()) != 1 {
		t.Fatalf("usage %v", u)
	}
	g := u.GetGpus()[0]
	// mean of utils: 424/12; active (>= 5%): 5, 50, 100, 100, 90, 10, 60 = 7 samples = 35 s.
	// power: 100..210 by 10 without 130: mean (sum 100..210 = 1860, less 130) 1730/11.
	if g.GetUuid() != "GPU-a" || g.GetSamples() != 12 || g.GetUtilMin() != 0 || g.GetUtilMax() != 100 ||
		g.GetUtilMean() != float32(424.0/12) || g.GetActiveSeconds() != 35 || g.GetSmActive() ||
		g.GetMemoryUsedMaxBytes() != 12000<<20 || g.GetMemoryTotalBytes() != 81559<<20 ||
		g.GetPowerMeanWatts() != float32(1730.0/11) || g.GetPowerMaxWatts() != 210 || g.GetTemperatureMaxC() != 42 {
		t.Errorf("summary %v", g)
	}
}

// TestGPUUsageSamplerBoundaries: a minute ends at the first sample of a later one, even when
// that sample failed; a minute without samples sends nothing; a metric absent all minute is
// unset; a gap of minutes sends only the minutes sampled.
func TestGPUUsageSamplerBoundaries(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 10, 0, 58, 0, time.UTC)
	fail := false
	feed := &daemon.GPUUsageFeed{}
	s := &GPUUsageSampler{
		Feed: feed, Interval: 5 * time.Second, Now: func() time.Time { return now },
		Query: func(context.Context) ([]daemon.GPUSample, error) {
			if fail {
				return nil, errors.New("nvidia-smi: no answer")
			}
			return []daemon.GPUSample{{Index: 1, UUID: "GPU-b", UtilPercent: 1, MemoryUsedMiB: 4, MemoryTotalMiB: 100,
				PowerWatts: math.NaN(), TemperatureC: math.NaN()}}, nil
		},
	}
	ctx := t.Context()
	s.Sample(ctx) // 10:00:58
	now = now.Add(3 * time.Second)
	fail = true
	s.Sample(ctx) // 10:01:01, failed: 10:00 still ends
	p := feed.Pending()
	if len(p) != 1 || p[0].GetMinute().AsTime().Minute() != 0 {
		t.Fatalf("pending %v", p)
	}
	g := p[0].GetGpus()[0]
	if g.GetSamples() != 1 || g.PowerMeanWatts != nil || g.PowerMaxWatts != nil || g.TemperatureMaxC != nil ||
		g.GetActiveSeconds() != 0 || g.ActiveSeconds == nil || g.GetIndex() != 1 {
		t.Errorf("summary %v", g)
	}
	if s.Latest() != nil {
		t.Errorf("latest after a failure: %v", s.Latest())
	}
	now = now.Add(2 * time.Minute) // 10:03:01: 10:01 and 10:02 had no samples
	s.Sample(ctx)
	fail = false
	s.Sample(ctx)
	now = now.Add(time.Minute)
	s.Sample(ctx)
	p = feed.Pending()
	if len(p) != 2 || p[1].GetMinute().AsTime().Minute() != 3 || p[1].GetGpus()[0].GetSamples() != 1 {
		t.Errorf("pending %v", p)
	}
}

// TestUsageProbeTimeout: a probe's timeout is under the interval.
func TestUsageProbeTimeout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ interval, want time.Duration }{
		{time.Second, 800 * time.Millisecond}, {5 * time.Second, 4 * time.Second}, {time.Minute, DefaultNvidiaSMITimeout},
	} {
		if got := UsageProbeTimeout(c.interval); got != c.want {
			t.Errorf("interval %v: %v, want %v", c.interval, got, c.want)
		}
	}
}

// TestQueryUsage runs a stand-in nvidia-smi that prints a fixture, and one that is not there.
func TestQueryUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prog := dir + "/nvidia-smi"
	fixture, _ := os.ReadFile("testdata/nvidia-smi-query/h100x8-power-na.csv")
	script := "#!/bin/sh\ncase \"$1\" in --query-gpu=index,uuid,*) cat <<'END'\n" + string(fixture) + "END\n;; *) exit 2;; esac\n"
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := (&Inventory{NvidiaSMI: prog}).QueryUsage(t.Context(), 5*time.Second)
	if err != nil || len(s) != 8 || !math.IsNaN(s[2].PowerWatts) {
		t.Errorf("samples %d, %v", len(s), err)
	}
	s, err = (&Inventory{NvidiaSMI: dir + "/none"}).QueryUsage(t.Context(), time.Second)
	if err != nil || s != nil {
		t.Errorf("no nvidia-smi: %v, %v", s, err)
	}
}

// TestDCGMRegistry serves the busy fixture and the [N/A] one, and reads them back with
// Prometheus's parser: dcgm-exporter's names and labels, one series per GPU, no series for a
// metric not given, label values escaped.
func TestDCGMRegistry(t *testing.T) {
	t.Parallel()
	samples := readUsageFixture(t, "h100x8-power-na.csv")
	samples[0].Name = "Model \"quoted\"\nnext"
	srv := httptest.NewServer(DCGMRegistry("node-1", func() []daemon.GPUSample { return samples }).Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int{DCGMGPUUtil: 7, DCGMFBUsed: 8, DCGMPowerUsage: 6, DCGMGPUTemp: 8} {
		f := fams[name]
		if f == nil || len(f.GetMetric()) != want {
			t.Errorf("%s: %v", name, f)
			continue
		}
		m := f.GetMetric()[0]
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["gpu"] != "0" || labels["UUID"] != samples[0].UUID || labels["modelName"] != samples[0].Name || labels["Hostname"] != "node-1" {
			t.Errorf("%s labels %v", name, labels)
		}
	}
	if v := fams[DCGMFBUsed].GetMetric()[0].GetGauge().GetValue(); v != 74213 {
		t.Errorf("FB_USED %v", v)
	}
}

// TestServeGPUMetrics listens on a free loopback port and stops with ctx.
func TestServeGPUMetrics(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	reg := DCGMRegistry("h", func() []daemon.GPUSample { return readUsageFixture(t, "h100x8-idle.csv") })
	if err := ServeGPUMetrics(ctx, "127.0.0.1:0", reg, nil); err != nil {
		t.Fatal(err)
	}
	if err := ServeGPUMetrics(ctx, "256.0.0.1:1", reg, nil); err == nil || !strings.Contains(err.Error(), "--gpu-metrics-listen") {
		t.Errorf("bad address: %v", err)
	}
}
