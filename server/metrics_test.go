package server_test

import (
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/metrics"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

// scrape reads /metrics without credentials and parses it with Prometheus's parser.
func scrape(t *testing.T, baseURL string) map[string]*dto.MetricFamily {
	t.Helper()
	res, err := http.Get(baseURL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != metrics.ContentType {
		t.Fatalf("GET /metrics: %s, %q", res.Status, res.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("the Prometheus parser rejects /metrics: %v", err)
	}
	return fams
}

func labels(m *dto.Metric) string {
	var parts []string
	for _, l := range m.Label {
		parts = append(parts, l.GetName()+"="+l.GetValue())
	}
	return strings.Join(parts, ",")
}

func TestMetricsCountCalls(t *testing.T) {
	t.Parallel()
	reg := metrics.NewRegistry()
	env := servertest.Start(t, dbtest.Pool(t), func(o *server.Options) { o.Metrics = reg })
	ctx := t.Context()
	for range 2 {
		if _, err := env.IAM(env.AdminKey).WhoAmI(ctx, &iamv1.WhoAmIRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.IAM("").WhoAmI(ctx, &iamv1.WhoAmIRequest{}); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("whoAmI without a key: %v", err)
	}

	fams := scrape(t, env.Server.URL)
	requests := map[string]float64{}
	for _, m := range fams["bc_api_requests_total"].GetMetric() {
		requests[labels(m)] = m.GetCounter().GetValue()
	}
	for series, want := range map[string]float64{
		"method=iam/whoAmI,code=ok":              2,
		"method=iam/whoAmI,code=unauthenticated": 1,
	} {
		if requests[series] != want {
			t.Errorf("bc_api_requests_total{%s} = %v, want %v (all: %v)", series, requests[series], want, requests)
		}
	}
	var latency *dto.Histogram
	for _, m := range fams["bc_api_request_duration_seconds"].GetMetric() {
		if labels(m) == "method=iam/whoAmI" {
			latency = m.GetHistogram()
		}
	}
	if latency.GetSampleCount() != 3 || latency.GetSampleSum() <= 0 {
		t.Errorf("bc_api_request_duration_seconds{method=iam/whoAmI}: %v", latency)
	}

	// An API without a registry of its own still serves its call counters.
	plain := servertest.Start(t, env.Pool, nil)
	if _, err := plain.IAM(plain.AdminKey).WhoAmI(ctx, &iamv1.WhoAmIRequest{}); err != nil {
		t.Fatal(err)
	}
	if fams := scrape(t, plain.Server.URL); len(fams["bc_api_requests_total"].GetMetric()) != 1 {
		t.Errorf("own registry: %v", fams["bc_api_requests_total"])
	}
}
