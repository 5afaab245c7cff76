package guard

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	systemv1 "github.com/better-compute/better-compute/gen/go/bettercompute/system/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/system/v1/systemv1connect"
	"github.com/better-compute/better-compute/internal/metrics"
	"github.com/better-compute/better-compute/internal/registry"
)

// The guard's overhead with metrics on and off (nil *metrics.API, a no-op):
//
//	go test -run '^$' -bench Guard -benchmem ./server/guard/
//
// BenchmarkGuardFinish measures the guard's closing step alone (metrics, span check, log
// record); BenchmarkGuardedCall a whole public unary call through a Connect handler.

func newBenchGuard(b *testing.B, withMetrics bool) (*Guard, *registry.Registry) {
	b.Helper()
	reg, err := registry.FromGlobal()
	if err != nil {
		b.Fatal(err)
	}
	g := New(reg, nil, nil, slog.New(slog.DiscardHandler))
	if withMetrics {
		g.WithMetrics(metrics.NewAPI(metrics.NewRegistry()))
	}
	return g, reg
}

func BenchmarkGuardFinish(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "metrics=off", true: "metrics=on"}[on], func(b *testing.B) {
			g, reg := newBenchGuard(b, on)
			m, ok := reg.ByProcedure(systemv1connect.SystemServiceInfoProcedure)
			if !ok {
				b.Fatal("system/info is not in the registry")
			}
			call := &Call{Method: m, RequestID: "bench"}
			ctx := context.Background()
			start := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				if err := g.finish(ctx, call, nil, start); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkGuardedCall(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "metrics=off", true: "metrics=on"}[on], func(b *testing.B) {
			g, _ := newBenchGuard(b, on)
			h := connect.NewUnaryHandler(systemv1connect.SystemServiceInfoProcedure,
				func(context.Context, *connect.Request[systemv1.InfoRequest]) (*connect.Response[systemv1.InfoResponse], error) {
					return connect.NewResponse(&systemv1.InfoResponse{Version: "bench"}), nil
				}, connect.WithInterceptors(g))
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, systemv1connect.SystemServiceInfoProcedure, strings.NewReader("{}"))
				req.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					body, _ := io.ReadAll(w.Body)
					b.Fatalf("status %d: %s", w.Code, body)
				}
			}
		})
	}
}
