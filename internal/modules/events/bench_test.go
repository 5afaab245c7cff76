package events

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/metrics"
	"github.com/better-compute/better-compute/internal/sinks"
	"github.com/better-compute/better-compute/module"
)

// BenchmarkJetStreamSink measures publishing to JetStream through the outbox dispatcher: each
// iteration commits 10,000 events over 1,000 subjects of 10 tenants in one transaction and waits
// until the stream has acknowledged all of them. The sinks role runs as BenchmarkOutboxDelivery
// runs it (batches of 1,000, 32 subjects in flight, 10 ms poll); the NATS server (JetStream on
// disk) runs in the same process, so its cost counts against the same CPUs.
//
//	go test -run '^$' -bench JetStreamSink -benchtime 10x ./internal/modules/events/
func BenchmarkJetStreamSink(b *testing.B) {
	const events, subjects = 10_000, 1_000
	pool, _ := migratedPool(b)
	n := startNATS(b)
	m := testModule(n.url())
	w, err := m.Workers(module.Worker{Pool: pool, Logger: slog.New(slog.DiscardHandler), Metrics: metrics.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	sink := w.Sinks[0].(*Sink)
	defer func() { _ = sink.Close(context.Background()) }()
	opts := runOptions(w.Sinks, slog.New(slog.DiscardHandler))
	opts.MinBackoff, opts.MaxBackoff, opts.LeaseTTL, opts.Refresh = 0, 0, 0, 50*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sinks.Run(ctx, locks.NewHolder(pool, "bench", nil), pool, opts) }()
	defer func() { cancel(); <-done }()

	tenants := newTenants(10)
	wait := func(want float64) {
		deadline := time.Now().Add(5 * time.Minute)
		for sink.in.published.Value() < want {
			if time.Now().After(deadline) {
				b.Fatalf("published %v of %v (%v failures)", sink.in.published.Value(), want, sink.in.failures.Value())
			}
			time.Sleep(time.Millisecond)
		}
	}
	// Warm up: the dispatcher holds its lease, the connection is open and the stream exists.
	burst(b, pool, tenants, 100, 100)
	wait(100)

	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		base := sink.in.published.Value()
		burst(b, pool, tenants, subjects, events)
		b.StartTimer()
		wait(base + events)
	}
	b.StopTimer()
	b.ReportMetric(float64(events*b.N)/b.Elapsed().Seconds(), "events/s")
}
