package metrics

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func text(t testing.TB, r *Registry) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.WriteText(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// parse reads text with Prometheus's own parser, failing the test on any error.
func parse(t testing.TB, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("the Prometheus parser rejects the output: %v\n%s", err, text)
	}
	return fams
}

func TestTextFormatGolden(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	c := r.Counter("test_requests_total", "Requests by method and code.", "method", "code")
	c.With("nodes/list", "ok").Add(3)
	c.With("iam/whoAmI", "unauthenticated").Inc()
	c.With("weird", "a\"b\\c\nd").Add(0.5)
	g := r.Gauge("test_temperature_celsius", "Help with a backslash \\ and a\nline feed.", "room")
	g.With("b").Set(-1.5)
	g.With("a").Set(1e21)
	r.Gauge("test_empty", "A family with no series yet.")
	h := r.Histogram("test_latency_seconds", "Latency.", []float64{0.1, 1, math.Inf(1)}, "method")
	h.With("x").Observe(0.05)
	h.With("x").Observe(0.1) // an observation equal to a bound falls in that bucket
	h.With("x").Observe(3)
	r.GaugeFunc("test_sessions", "Sessions.", func() float64 { return 7 })
	r.Func("test_lag", "Lag per sink.", TypeGauge, []string{"sink"}, func(emit Emit) {
		emit(math.Inf(1), "z")
		emit(2, "a")
		emit(math.NaN(), "m")
		emit(4, "a") // emitted twice: the last value wins
	})

	const want = `# HELP test_empty A family with no series yet.
# TYPE test_empty gauge
# HELP test_lag Lag per sink.
# TYPE test_lag gauge
test_lag{sink="a"} 4
test_lag{sink="m"} NaN
test_lag{sink="z"} +Inf
# HELP test_latency_seconds Latency.
# TYPE test_latency_seconds histogram
test_latency_seconds_bucket{method="x",le="0.1"} 2
test_latency_seconds_bucket{method="x",le="1"} 2
test_latency_seconds_bucket{method="x",le="+Inf"} 3
test_latency_seconds_sum{method="x"} 3.15
test_latency_seconds_count{method="x"} 3
# HELP test_requests_total Requests by method and code.
# TYPE test_requests_total counter
test_requests_total{method="iam/whoAmI",code="unauthenticated"} 1
test_requests_total{method="nodes/list",code="ok"} 3
test_requests_total{method="weird",code="a\"b\\c\nd"} 0.5
# HELP test_sessions Sessions.
# TYPE test_sessions gauge
test_sessions 7
# HELP test_temperature_celsius Help with a backslash \\ and a\nline feed.
# TYPE test_temperature_celsius gauge
test_temperature_celsius{room="a"} 1e+21
test_temperature_celsius{room="b"} -1.5
`
	got := text(t, r)
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}

	fams := parse(t, got)
	req := fams["test_requests_total"]
	if req.GetType() != dto.MetricType_COUNTER || len(req.Metric) != 3 {
		t.Fatalf("test_requests_total parsed as %v", req)
	}
	for _, m := range req.Metric {
		if labelValue(m, "method") == "weird" {
			if v := labelValue(m, "code"); v != "a\"b\\c\nd" {
				t.Errorf("escaped label value reads back as %q", v)
			}
		}
	}
	if help := fams["test_temperature_celsius"].GetHelp(); help != "Help with a backslash \\ and a\nline feed." {
		t.Errorf("help reads back as %q", help)
	}
	hist := fams["test_latency_seconds"].Metric[0].GetHistogram()
	if hist.GetSampleCount() != 3 || hist.GetSampleSum() != 3.15 || hist.Bucket[0].GetCumulativeCount() != 2 {
		t.Errorf("histogram reads back as %v", hist)
	}
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func TestInvalidUTF8LabelValue(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	r.Gauge("test_g", "G.", "v").With("a\xffb").Set(1)
	parse(t, text(t, r))
	if got := text(t, r); !strings.Contains(got, `v="a`+"\uFFFD"+`b"`) {
		t.Errorf("invalid UTF-8 not replaced: %q", got)
	}
}

func TestRegistrationPanics(t *testing.T) {
	t.Parallel()
	for name, register := range map[string]func(r *Registry){
		"bad metric name":       func(r *Registry) { r.Gauge("1abc", "x") },
		"reserved metric name":  func(r *Registry) { r.Gauge("__x", "x") },
		"counter without total": func(r *Registry) { r.Counter("test_requests", "x") },
		"bad label name":        func(r *Registry) { r.Gauge("test_g", "x", "a-b") },
		"reserved label":        func(r *Registry) { r.Gauge("test_g", "x", "__name") },
		"label twice":           func(r *Registry) { r.Gauge("test_g", "x", "a", "a") },
		"histogram le":          func(r *Registry) { r.Histogram("test_h", "x", DurationBuckets, "le") },
		"buckets not ascending": func(r *Registry) { r.Histogram("test_h", "x", []float64{1, 1}) },
		"too many labels":       func(r *Registry) { r.Gauge("test_g", "x", "a", "b", "c", "d", "e") },
		"duplicate":             func(r *Registry) { r.Gauge("test_g", "x"); r.Gauge("test_g", "y") },
		"histogram series":      func(r *Registry) { r.Histogram("test_h", "x", DurationBuckets); r.Gauge("test_h_count", "y") },
		"func of histogram":     func(r *Registry) { r.Func("test_f", "x", TypeHistogram, nil, func(Emit) {}) },
		"wrong value count":     func(r *Registry) { r.Gauge("test_g", "x", "a").With("1", "2") },
		"negative counter add":  func(r *Registry) { r.Counter("test_c_total", "x").With().Add(-1) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if recover() == nil {
					t.Error("did not panic")
				}
			}()
			register(NewRegistry())
		})
	}
}

func TestGaugeDeleteAndReset(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	g := r.Gauge("test_g", "G.", "k")
	g.With("a").Inc()
	g.With("b").Dec()
	g.With("c").Add(2.5)
	g.Delete("a")
	if got := text(t, r); strings.Contains(got, `k="a"`) || !strings.Contains(got, `test_g{k="b"} -1`) || !strings.Contains(got, `test_g{k="c"} 2.5`) {
		t.Errorf("after delete:\n%s", got)
	}
	g.Reset()
	if got := text(t, r); strings.Contains(got, "test_g{") {
		t.Errorf("after reset:\n%s", got)
	}
}

func TestConcurrentUseAndScrape(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	c := r.Counter("test_c_total", "C.", "k")
	h := r.Histogram("test_h_seconds", "H.", DurationBuckets, "k")
	var wg sync.WaitGroup
	const workers, each = 8, 1000
	for w := range workers {
		wg.Go(func() {
			k := string(rune('a' + w%3))
			for i := range each {
				c.With(k).Inc()
				c.With(k).Add(0.5)
				h.With(k).Observe(float64(i) / 1000)
			}
		})
	}
	stop := make(chan struct{})
	scraped := make(chan struct{})
	go func() {
		defer close(scraped)
		for {
			select {
			case <-stop:
				return
			default:
				parse(t, text(t, r))
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-scraped
	var total float64
	var count uint64
	for _, k := range []string{"a", "b", "c"} {
		total += c.With(k).Value()
		count += h.With(k).Count()
	}
	if total != workers*each*1.5 || count != workers*each {
		t.Errorf("counter total %v, histogram count %d", total, count)
	}
}

func TestHandler(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	r.Counter("test_c_total", "C.").With().Inc()
	srv := httptest.NewServer(r.Handler())
	defer srv.Close()

	res, err := http.Get(srv.URL) // the transport asks for gzip and decompresses transparently
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != ContentType || !res.Uncompressed {
		t.Errorf("status %d, content type %q, uncompressed by the transport %v", res.StatusCode, res.Header.Get("Content-Type"), res.Uncompressed)
	}
	parse(t, string(body))

	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Accept-Encoding", "identity")
	res, err = http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.Header.Get("Content-Encoding") != "" || !strings.Contains(string(body), "test_c_total 1\n") {
		t.Errorf("identity: encoding %q, body %q", res.Header.Get("Content-Encoding"), body)
	}

	req.Header.Set("Accept-Encoding", "gzip")
	res, err = http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(zr)
	res.Body.Close()
	if res.Header.Get("Content-Encoding") != "gzip" || !strings.Contains(string(body), "test_c_total 1\n") {
		t.Errorf("gzip: encoding %q, body %q", res.Header.Get("Content-Encoding"), body)
	}

	res, err = http.Post(srv.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: status %d", res.StatusCode)
	}
}

func TestAcceptsGzip(t *testing.T) {
	t.Parallel()
	for h, want := range map[string]bool{
		"":                       false,
		"gzip":                   true,
		"deflate, gzip;q=1.0, *": true,
		"GZIP":                   true,
		"gzip;q=0":               false,
		"identity":               false,
		"x-gzip":                 false,
	} {
		if got := acceptsGzip(h); got != want {
			t.Errorf("acceptsGzip(%q) = %v", h, got)
		}
	}
}

func TestAPIObserve(t *testing.T) { //nolint:paralleltest // testing.AllocsPerRun refuses to run in a parallel test
	var none *API
	none.Observe("nodes", "list", "ok", time.Millisecond) // a nil API records nothing

	r := NewRegistry()
	a := NewAPI(r)
	if NewAPI(r) != a {
		t.Error("a second NewAPI on one registry built new instruments")
	}
	a.Observe("nodes", "list", "ok", 3*time.Millisecond)
	a.Observe("nodes", "list", "ok", 30*time.Millisecond)
	a.Observe("nodes", "list", "not_found", time.Millisecond)
	a.Observe("", "", "permission_denied", time.Millisecond)
	fams := parse(t, text(t, r))
	counts := map[[2]string]float64{}
	for _, m := range fams["bc_api_requests_total"].Metric {
		counts[[2]string{labelValue(m, "method"), labelValue(m, "code")}] = m.GetCounter().GetValue()
	}
	want := map[[2]string]float64{{"nodes/list", "ok"}: 2, {"nodes/list", "not_found"}: 1, {"unknown", "permission_denied"}: 1}
	for k, v := range want {
		if counts[k] != v {
			t.Errorf("requests %v = %v, want %v (all: %v)", k, counts[k], v, counts)
		}
	}
	for _, m := range fams["bc_api_request_duration_seconds"].Metric {
		if labelValue(m, "method") == "nodes/list" && m.GetHistogram().GetSampleCount() != 3 {
			t.Errorf("nodes/list latency count %d", m.GetHistogram().GetSampleCount())
		}
	}
	allocs := testing.AllocsPerRun(100, func() { a.Observe("nodes", "list", "ok", time.Millisecond) })
	if allocs != 0 {
		t.Errorf("Observe of a known method allocates %v times", allocs)
	}
}

func TestGatewayMetrics(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	g := NewGateway(r)
	g.CountSessions(func() int { return 2 })
	NewGateway(r).CountSessions(func() int { return 3 })
	g.ObserveDispatch(20 * time.Millisecond)
	fams := parse(t, text(t, r))
	if v := fams["bc_gateway_sessions"].Metric[0].GetGauge().GetValue(); v != 5 {
		t.Errorf("sessions %v", v)
	}
	if n := fams["bc_gateway_dispatch_latency_seconds"].Metric[0].GetHistogram().GetSampleCount(); n != 1 {
		t.Errorf("dispatch count %d", n)
	}
	var none *Gateway
	none.ObserveDispatch(time.Second)
	none.CountSessions(func() int { return 1 })
}

func BenchmarkAPIObserve(b *testing.B) {
	a := NewAPI(NewRegistry())
	b.ReportAllocs()
	for b.Loop() {
		a.Observe("nodes", "list", "ok", time.Millisecond)
	}
}
