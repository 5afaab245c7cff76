package process

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/dbtest"
)

// TestMetricsListenTakesMetricsOffTheAPI: with metrics.listen set, a process with the api role
// serves /metrics there, and its API port answers /metrics with 404.
func TestMetricsListenTakesMetricsOffTheAPI(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Secret = "metrics-test-secret-0123456789abcdef"
	cfg.Roles = config.RoleAPI
	cfg.Host, cfg.Port = "127.0.0.1", 0
	cfg.Metrics.Listen = "127.0.0.1:0"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	log := NewLogger(config.Log{Level: "info", Format: "json"}, &logs)
	ctx, cancel := context.WithCancel(t.Context())
	listening := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- Run(ctx, Options{Config: cfg, Pool: dbtest.Pool(t), Logger: log,
			OnListen: func(l Listening) { listening <- l.APIURL }})
	}()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	var apiURL string
	select {
	case apiURL = <-listening:
	case err := <-errc:
		t.Fatalf("Run: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the process did not start listening")
	}
	metricsURL := logs.field("metrics listening", "url")
	if metricsURL == "" {
		t.Fatal("no \"metrics listening\" log line")
	}
	status := func(url string) int {
		t.Helper()
		res, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := status(metricsURL); got != http.StatusOK {
		t.Errorf("GET %s = %d, want 200", metricsURL, got)
	}
	if got := status(strings.TrimSuffix(apiURL, cfg.BasePath) + "/metrics"); got != http.StatusNotFound {
		t.Errorf("GET /metrics on the API's port = %d, want 404", got)
	}
}
