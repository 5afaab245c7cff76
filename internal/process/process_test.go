package process

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// logBuffer is a log destination safe for concurrent writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// field returns the value of key in the first JSON log line whose msg is msg.
func (b *logBuffer) field(msg, key string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	for line := range strings.SplitSeq(b.buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			s, _ := m[key].(string)
			return s
		}
	}
	return ""
}

// TestMetricsListener: a process without the api role serves /metrics (and /healthz) on
// metrics.listen, with the values read from the database, here its own leases.
func TestMetricsListener(t *testing.T) {
	t.Parallel()
	cfg := config.Default()
	cfg.Secret = "metrics-test-secret-0123456789abcdef"
	cfg.Roles = "controllers"
	cfg.Metrics.Listen = "127.0.0.1:0"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	log := NewLogger(config.Log{Level: "info", Format: "json"}, &logs)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, Options{Config: cfg, Pool: dbtest.Pool(t), Logger: log}) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	var url string
	for deadline := time.Now().Add(60 * time.Second); url == ""; time.Sleep(20 * time.Millisecond) { // a loaded CI machine starts slowly
		if time.Now().After(deadline) {
			t.Fatal("no \"metrics listening\" log line")
		}
		url = logs.field("metrics listening", "url")
	}
	holder := logs.field("worker roles starting", "holder")

	get := func(path string) string {
		t.Helper()
		res, err := http.Get(strings.TrimSuffix(url, "/metrics") + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, res.Status)
		}
		return string(body)
	}
	if got := get("/healthz"); got != "ok\n" {
		t.Errorf("/healthz: %q", got)
	}
	// The shard leases are taken within a second or two; a reading is cached for 5s.
	var held float64
	for deadline := time.Now().Add(20 * time.Second); held == 0; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no leases of %s in /metrics:\n%s", holder, get("/metrics"))
		}
		p := expfmt.NewTextParser(model.LegacyValidation)
		fams, err := p.TextToMetricFamilies(strings.NewReader(get("/metrics")))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fams["bc_leases_held"].GetMetric() {
			if m.GetLabel()[0].GetValue() == holder {
				held = m.GetGauge().GetValue()
			}
		}
		if fams["bc_db_pool_max_connections"] == nil || fams["bc_metrics_database_up"] == nil {
			t.Fatalf("families missing: %v", fams)
		}
	}
	t.Logf("%s holds %v leases", holder, held)
}
