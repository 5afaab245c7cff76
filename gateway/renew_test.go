package gateway_test

import (
	"testing"
	"time"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/internal/poll"
)

// TestDaemonRenewsBeforeExpiry gives nodes certificates that live a few seconds: the daemon
// renews while connected, and after its first certificate has expired it still reconnects (to
// another gateway, through the balancer) with the renewed one.
func TestDaemonRenewsBeforeExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	short := func(o *gateway.Options) { o.CertTTL = 4 * time.Second }
	gw1 := e.StartGateway("gw1", short)
	gw2 := e.StartGateway("gw2", short)
	lb := newBalancer(t, gw1.Addr)
	f := e.startFake(lb.addr, e.token(1, time.Now().Add(time.Hour)))
	first := f.Status().NotAfter
	poll.Until(t, 15*time.Second, "the daemon renews its certificate", func() bool { return f.Status().NotAfter.After(first) })
	poll.Until(t, 15*time.Second, "the first certificate expires", func() bool { return time.Now().After(first.Add(time.Second)) })
	if !f.Status().Connected {
		t.Fatal("the session ended when the first certificate expired")
	}
	lb.target.Store(gw2.Addr)
	gw1.Stop()
	poll.Until(t, 15*time.Second, "the daemon reconnects with the renewed certificate", func() bool {
		return f.Status().Connected && gw2.Sessions() == 1
	})
	var renewed time.Time
	if err := e.pool.QueryRow(ctx, "SELECT cert_not_after FROM nodes WHERE id = $1", f.Status().NodeID).Scan(&renewed); err != nil || !renewed.After(first) {
		t.Errorf("node's recorded certificate expiry %v (%v), first was %v", renewed, err, first)
	}
}
