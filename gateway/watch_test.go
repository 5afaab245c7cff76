package gateway_test

import (
	"testing"
	"time"

	"github.com/better-compute/better-compute/internal/poll"
)

// TestSessionOnAnotherGatewaySupersedes opens a node's session on gw1, then another on gw2: gw1's
// watch finds the newer claim and ends its own session with a goodbye that says why, and the
// node's session on gw2 stays.
func TestSessionOnAnotherGatewaySupersedes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	gw1 := e.startGateway("gw1")
	gw2 := e.startGateway("gw2")
	n := e.joinNode(gw1.addr)
	first := n.open(t, ctx)
	defer first.CloseRequest() //nolint:errcheck
	on2 := newRawNode(t, gw2.addr, e.bundle.RootPEM(), n.id)
	second := on2.open(t, ctx)
	defer second.CloseRequest() //nolint:errcheck

	done := make(chan string, 1)
	go func() {
		for {
			res, err := first.Receive()
			if err != nil {
				done <- ""
				return
			}
			if bye := res.GetGoodbye(); bye != nil {
				done <- bye.GetReason()
				return
			}
		}
	}()
	select {
	case reason := <-done:
		if reason != "superseded by a session on another gateway" {
			t.Errorf("gw1's session ended with goodbye %q", reason)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("gw1 kept the superseded session for 10s")
	}
	// The goodbye is written before the handler lets go of the session.
	poll.Until(t, 5*time.Second, "gw1 lets go of the session", func() bool { return gw1.Sessions() == 0 })
	if gw2.Sessions() != 1 {
		t.Errorf("gw2 holds %d sessions, want 1", gw2.Sessions())
	}
}
