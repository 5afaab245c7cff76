package sinks

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/webhook"
)

// BenchmarkOutboxDelivery measures webhook delivery: each iteration commits 20,000 events over
// 1,000 subjects (5,000 over 32 and over 1 in the sub-benchmarks that show the cost of
// per-subject order) in one transaction and waits until a local receiver has verified and accepted all of them. The
// receiver runs in the same process, so its cost counts against the same CPUs.
//
//	go test -run '^$' -bench OutboxDelivery -benchtime 10x ./workers/sinks/
func BenchmarkOutboxDelivery(b *testing.B) {
	for _, c := range []struct{ events, subjects int }{{20_000, 1_000}, {5_000, 32}, {5_000, 1}} {
		b.Run(fmt.Sprintf("subjects=%d", c.subjects), func(b *testing.B) { benchmarkDelivery(b, c.events, c.subjects) })
	}
}

func benchmarkDelivery(b *testing.B, events, subjects int) {
	b.Helper()
	ctx := context.Background()
	pool := dbtest.Pool(b)
	tenant := newTenant(b, pool)

	var secret atomic.Pointer[string]
	var received, bad atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify(*secret.Load(), r.Header, body); err != nil {
			bad.Add(1)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		received.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rcv.Close()
	_, s := newWebhook(b, pool, tenant, rcv.URL)
	secret.Store(&s)

	opts := Options{Sealer: testSealer(b), AllowPrivate: true, Refresh: 50 * time.Millisecond, Poll: 10 * time.Millisecond}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- Run(rctx, locks.NewHolder(pool, "bench", nil), pool, opts) }()
	defer func() { cancel(); <-done }()

	insert := func(n, subjects int) {
		if _, err := pool.Exec(ctx, `INSERT INTO outbox (tenant_id, type, subject, payload)
			SELECT $1, 'node.updated', 'node/' || (i % $3), jsonb_build_object('seq', i / $3 + 1, 'node', 'node/' || (i % $3))
			FROM generate_series(0, $2 - 1) AS i`, tenant, n, subjects); err != nil {
			b.Fatal(err)
		}
	}
	wait := func(want int64) {
		deadline := time.Now().Add(5 * time.Minute)
		for received.Load() < want {
			if time.Now().After(deadline) || bad.Load() > 0 {
				b.Fatalf("received %d of %d (%d failed verification)", received.Load(), want, bad.Load())
			}
			time.Sleep(time.Millisecond)
		}
	}
	// Warm up: the dispatcher holds its lease and has connections open.
	insert(100, 100)
	wait(100)

	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		base := received.Load()
		insert(events, subjects)
		b.StartTimer()
		wait(base + int64(events))
	}
	b.StopTimer()
	b.ReportMetric(float64(events*b.N)/b.Elapsed().Seconds(), "events/s")
}
