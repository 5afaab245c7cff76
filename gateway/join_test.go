package gateway_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/internal/daemon"
)

// TestConcurrentJoinsNeverOverspendAToken races more joins than a token has uses: exactly its
// uses succeed, and the others are refused and leave no node behind.
func TestConcurrentJoinsNeverOverspendAToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw := e.startGateway("gw1")
	token := e.token(3, time.Now().Add(time.Hour))
	before := e.countNodes()
	var ok, refused atomic.Int32
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			_, err := daemon.Dialer{Gateway: gw.addr}.Join(ctx, e.bundle.RootPEM(), token, "racer")
			switch {
			case err == nil:
				ok.Add(1)
			case connect.CodeOf(err) == connect.CodeUnauthenticated:
				refused.Add(1)
			default:
				t.Errorf("join: %v", err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 3 || refused.Load() != 7 {
		t.Errorf("%d joins succeeded and %d were refused, want 3 and 7", ok.Load(), refused.Load())
	}
	if n := e.countNodes() - before; n != 3 {
		t.Errorf("%d nodes created, want 3", n)
	}
	var uses int
	if err := e.pool.QueryRow(ctx, "SELECT uses FROM join_tokens").Scan(&uses); err != nil || uses != 3 {
		t.Errorf("token uses %d (%v), want 3", uses, err)
	}
}
