package gateway_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	"github.com/better-compute/better-compute/internal/daemon"
)

// BenchmarkJoin measures joins through one gateway on loopback TLS, 32 in flight as the
// simulator's default, each a fresh key, CSR, handshake and join transaction. The daemons' side
// runs in the same process, so a CPU profile shows both; joins/s is the figure.
func BenchmarkJoin(b *testing.B) {
	b.Run("nodes=0", func(b *testing.B) { benchJoins(b, gatewaytest.New(b)) })
	// The tenant has 10,000 nodes whose rows heartbeats rewrote five times over (issue 18).
	b.Run("nodes=10000", func(b *testing.B) {
		e := gatewaytest.New(b)
		if _, err := e.Pool.Exec(ctx, `INSERT INTO nodes (id, tenant_id, state)
			SELECT gen_random_uuid(), $1, 'ready' FROM generate_series(1, 10000)`, e.Tenant); err != nil {
			b.Fatal(err)
		}
		for range 5 {
			if _, err := e.Pool.Exec(ctx, "INSERT INTO node_liveness (node_id, last_seen_at) SELECT id, now() FROM nodes ON CONFLICT (node_id) DO UPDATE SET last_seen_at = now()"); err != nil {
				b.Fatal(err)
			}
		}
		benchJoins(b, e)
	})
}

func benchJoins(b *testing.B, e *gatewaytest.Env) {
	b.Helper()
	gw := e.StartGateway("bench", func(o *gateway.Options) { o.TenantNodes = 100_000 })
	token := e.Token(int32(min(b.N+64, 1<<30)), time.Now().Add(time.Hour))
	root := e.Bundle.RootPEM()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range 32 {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if _, err := (daemon.Dialer{Gateway: gw.Addr}).Join(ctx, root, token, "bench"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "joins/s")
}
