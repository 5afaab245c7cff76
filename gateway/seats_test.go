package gateway_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/poll"
)

// TestSessionsStopAtTheGatewaysBound: a gateway bounded to one session refuses a second node,
// naming the key, and gives the seat to the next node once the first node's session has ended.
func TestSessionsStopAtTheGatewaysBound(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw := e.StartGateway("gw-seats", func(o *gateway.Options) { o.Limits.Sessions = 1 })

	dialer := daemon.Dialer{Gateway: gw.Addr}
	id, err := dialer.Join(ctx, e.bundle.RootPEM(), e.token(1, time.Now().Add(time.Hour)), "first")
	if err != nil {
		t.Fatal(err)
	}
	first, err := daemon.NewFake(id, daemon.FakeOptions{Dialer: dialer})
	if err != nil {
		t.Fatal(err)
	}
	fctx, stopFirst := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = first.Run(fctx) }()
	t.Cleanup(func() { stopFirst(); <-done })
	poll.Until(t, 15*time.Second, "the first node holds a session", func() bool { return first.Status().Connected })

	second := e.runFake(gw.Addr, daemon.FakeOptions{})
	err = lastError(t, second, "resource_exhausted", "limits.gatewaySessions")
	if !strings.Contains(err.Error(), "(1)") {
		t.Errorf("refusal %q does not say the bound", err)
	}
	if n := gw.Sessions(); n != 1 {
		t.Errorf("%d sessions, want 1", n)
	}

	stopFirst()
	<-done
	poll.Until(t, 15*time.Second, "the first session ends", func() bool { return gw.Sessions() == 0 || second.Status().Connected })
	third := e.runFake(gw.Addr, daemon.FakeOptions{})
	poll.Until(t, 30*time.Second, "a node takes the freed seat", func() bool {
		return third.Status().Connected || second.Status().Connected
	})
}
