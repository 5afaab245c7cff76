package gateway_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/quota"
)

// TestJoinsStopAtTheTenantsNodeCap races joins at a tenant with room for two nodes: exactly two
// join, the others are refused with resource_exhausted naming the cap and spend no use of the
// token.
func TestJoinsStopAtTheTenantsNodeCap(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw := e.StartGateway("gw-cap", func(o *gateway.Options) { o.TenantNodes = 2 })
	token := e.token(10, time.Now().Add(time.Hour))
	var ok, refused atomic.Int32
	var wg sync.WaitGroup
	for range 6 {
		wg.Go(func() {
			_, err := daemon.Dialer{Gateway: gw.Addr}.Join(ctx, e.bundle.RootPEM(), token, "capped")
			switch {
			case err == nil:
				ok.Add(1)
			case connect.CodeOf(err) == connect.CodeResourceExhausted && strings.Contains(err.Error(), quota.Nodes.Key()):
				refused.Add(1)
			default:
				t.Errorf("join: %v", err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 2 || refused.Load() != 4 {
		t.Errorf("%d joins succeeded and %d were refused, want 2 and 4", ok.Load(), refused.Load())
	}
	if n := e.countNodes(); n != 2 {
		t.Errorf("%d nodes, want 2", n)
	}
	var uses int
	if err := e.pool.QueryRow(ctx, "SELECT uses FROM join_tokens").Scan(&uses); err != nil || uses != 2 {
		t.Errorf("token uses %d (%v), want 2", uses, err)
	}
}
