package gateway_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gateway/gatewaytest"
	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/poll"
)

// BenchmarkCommandRoundTrip measures one command at a time to a FakeDaemon: the command row
// written, the gateway poked (as the API's notifier does after its commit), the command sent on
// the session, run (echo), its result written; timed until the database holds the result.
// transport=h2 is the direct listener, transport=websocket the WebSocket listener with the
// gateway's own outer TLS. Reported as p50 and p99 per command.
func BenchmarkCommandRoundTrip(b *testing.B) {
	e := gatewaytest.New(b)
	gw := e.StartGateway("bench", gatewaytest.WebSocket(b, true))
	for _, tc := range []struct {
		name   string
		dialer daemon.Dialer
	}{
		{"transport=h2", daemon.Dialer{Gateway: gw.Addr}},
		{"transport=websocket", daemon.Dialer{Gateway: gw.Addr, Transport: daemon.TransportWebSocket, WebSocketURL: gw.WebSocketURL}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			f, err := daemon.JoinFake(ctx, e.Bundle.RootPEM(), e.Token(1, time.Now().Add(time.Hour)), "bench-"+uuid.NewString()[:8], daemon.FakeOptions{Dialer: tc.dialer})
			if err != nil {
				b.Fatal(err)
			}
			fctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); _ = f.Run(fctx) }()
			defer func() { cancel(); <-done }()
			poll.Until(b, 10*time.Second, "the daemon connects", func() bool { return f.Status().Connected })
			node := uuid.MustParse(f.Status().NodeID)
			q := db.New(e.Pool)
			took := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				c, err := q.CreateCommand(ctx, db.CreateCommandParams{
					ID: uuid.Must(uuid.NewV7()), TenantID: e.Tenant, NodeID: node, Type: "echo",
					Payload: []byte(`{"data":{"k":"v"}}`), IdempotencyKey: uuid.NewString(), Deadline: time.Now().Add(time.Minute),
				})
				if err != nil {
					b.Fatal(err)
				}
				gw.Poke(node)
				poll.Until(b, 10*time.Second, "the command succeeds", func() bool {
					var state string
					_ = e.Pool.QueryRow(ctx, "SELECT state FROM commands WHERE id = $1", c.ID).Scan(&state)
					return state == "succeeded"
				}, poll.Every(200*time.Microsecond))
				took = append(took, time.Since(start))
			}
			b.StopTimer()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2])/float64(time.Millisecond), "p50-ms")
			b.ReportMetric(float64(took[len(took)*99/100])/float64(time.Millisecond), "p99-ms")
		})
	}
}
