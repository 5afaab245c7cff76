package events

import (
	"sync"

	"github.com/better-compute/better-compute/internal/metrics"
)

// instruments are the sink's metrics: bc_events_nats_published_total,
// bc_events_nats_duplicates_total, bc_events_nats_failures_total and
// bc_events_nats_publish_latency_seconds (the last publish's, until the stream acknowledged it).
type instruments struct {
	published, duplicates, failures *metrics.Counter
	latency                         *metrics.Gauge
}

var (
	instrumentsMu sync.Mutex
	// byRegistry shares one set of instruments per registry: a registry refuses a name twice,
	// and a test process may build the module's workers more than once.
	byRegistry = map[*metrics.Registry]*instruments{}
)

// instrumentsIn returns the instruments in r, registering them on first use; with a nil r they
// count into a registry of their own.
func instrumentsIn(r *metrics.Registry) *instruments {
	if r == nil {
		r = metrics.NewRegistry()
	}
	instrumentsMu.Lock()
	defer instrumentsMu.Unlock()
	if in, ok := byRegistry[r]; ok {
		return in
	}
	in := &instruments{
		published: r.Counter("bc_events_nats_published_total",
			"Events the events module published to its NATS stream (acknowledged, not counting duplicates the stream dropped).").With(),
		duplicates: r.Counter("bc_events_nats_duplicates_total",
			"Events the events module published again that the stream dropped as duplicates (by Nats-Msg-Id).").With(),
		failures: r.Counter("bc_events_nats_failures_total",
			"Failed publishes of the events module (not connected, no acknowledgement in time, refused); each is retried.").With(),
		latency: r.Gauge("bc_events_nats_publish_latency_seconds",
			"How long the events module's last publish took until the stream acknowledged it.").With(),
	}
	byRegistry[r] = in
	return in
}
