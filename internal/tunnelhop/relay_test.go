package tunnelhop_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/better-compute/better-compute/client/tunnel"
	"github.com/better-compute/better-compute/client/tunneltest"
	"github.com/better-compute/better-compute/internal/tunnelhop"
)

// relayed is a Relay between two streams and the far ends of those streams, as the test drives
// them: client ──▶ relay ──▶ node.
type relayed struct {
	relay        *tunnelhop.Relay
	client, node *tunnel.ByteStream
	ended        chan ended
}

type ended struct {
	code   tunnel.Code
	reason string
}

func startRelay(t *testing.T) *relayed {
	t.Helper()
	client, a, _, _ := tunneltest.StreamPair()
	b, node, _, _ := tunneltest.StreamPair()
	r := &relayed{relay: tunnelhop.NewRelay(a, b, tunnel.CodeReset, tunnel.CodeGatewayLost), client: client, node: node, ended: make(chan ended, 1)}
	go func() {
		code, reason := r.relay.Run()
		r.ended <- ended{code, reason}
	}()
	return r
}

// TestRelayCarriesBothWays: data goes each way as it comes, half-closes pass through (the node
// still answers after the client's CloseWrite), the byte counters count payloads, and the relay
// ends as normal once both sides closed.
func TestRelayCarriesBothWays(t *testing.T) {
	t.Parallel()
	r := startRelay(t)
	big := bytes.Repeat([]byte("x"), tunnel.MaxPayload)
	tunneltest.MustWrite(t, r.client, tunnel.Frame{Type: tunnel.Data, Payload: []byte("hello")})
	if got := tunneltest.MustRead(t, r.node, tunnel.Data); string(got) != "hello" {
		t.Errorf("node got %q", got)
	}
	tunneltest.MustWrite(t, r.client, tunnel.Frame{Type: tunnel.Data, Payload: big})
	if got := tunneltest.MustRead(t, r.node, tunnel.Data); !bytes.Equal(got, big) {
		t.Errorf("node got %d bytes", len(got))
	}
	tunneltest.MustWrite(t, r.client, tunnel.Frame{Type: tunnel.CloseWrite})
	tunneltest.MustRead(t, r.node, tunnel.CloseWrite)
	// The client's direction is closed; the node's still flows.
	tunneltest.MustWrite(t, r.node, tunnel.Frame{Type: tunnel.Data, Payload: []byte("last words")})
	if got := tunneltest.MustRead(t, r.client, tunnel.Data); string(got) != "last words" {
		t.Errorf("client got %q", got)
	}
	select {
	case <-r.relay.Done():
		t.Fatal("the relay ended with one direction open")
	default:
	}
	tunneltest.MustWrite(t, r.node, tunnel.Frame{Type: tunnel.CloseWrite})
	tunneltest.MustRead(t, r.client, tunnel.CloseWrite)
	if e := <-r.ended; e.code != tunnel.CodeNormal {
		t.Errorf("relay ended with %d %q, want %d", e.code, e.reason, tunnel.CodeNormal)
	}
	<-r.relay.Done()
	if a, b := r.relay.AToB.Load(), r.relay.BToA.Load(); a != int64(5+len(big)) || b != int64(len("last words")) {
		t.Errorf("counted %d bytes to the node and %d back", a, b)
	}
}

// TestRelayAbort: Abort sends both ends an Abort frame with the code and reason, and Run returns
// them.
func TestRelayAbort(t *testing.T) {
	t.Parallel()
	r := startRelay(t)
	tunneltest.MustWrite(t, r.client, tunnel.Frame{Type: tunnel.Data, Payload: []byte("hi")})
	tunneltest.MustRead(t, r.node, tunnel.Data)
	go r.relay.Abort(tunnel.CodeIdle, "idle for 1h0m0s")
	// The relay writes the client's first, then the node's (the pipes wait for their reader).
	for i, s := range []tunnel.Stream{r.client, r.node} {
		if code, reason := tunneltest.ReadAbort(t, s); code != tunnel.CodeIdle || reason != "idle for 1h0m0s" {
			t.Errorf("end %d got an abort with %d %q", i, code, reason)
		}
	}
	if e := <-r.ended; e.code != tunnel.CodeIdle || e.reason != "idle for 1h0m0s" {
		t.Errorf("relay ended with %d %q", e.code, e.reason)
	}
	// Both streams are closed: nothing hangs on them.
	if _, err := r.client.ReadFrame(); err == nil {
		t.Error("the client's stream still reads")
	}
}

// TestRelayEnds: an end's Abort frame ends the tunnel with its code for the other end too; an
// end whose stream breaks ends it with that end's lost code; a malformed frame with
// CodeProtocol.
func TestRelayEnds(t *testing.T) {
	t.Parallel()
	t.Run("abort frame", func(t *testing.T) {
		t.Parallel()
		r := startRelay(t)
		go func() {
			_ = r.node.WriteFrame(tunnel.Frame{Type: tunnel.Abort, Payload: tunnel.AbortPayload(tunnel.CodeDialFailed, "connection refused")})
		}()
		if code, reason := tunneltest.ReadAbort(t, r.client); code != tunnel.CodeDialFailed || reason != "connection refused" {
			t.Errorf("client got %d %q", code, reason)
		}
		// The relay tells the node too, and closes its stream after.
		tunneltest.ReadAbort(t, r.node)
		if e := <-r.ended; e.code != tunnel.CodeDialFailed {
			t.Errorf("relay ended with %d %q", e.code, e.reason)
		}
	})
	t.Run("broken node stream", func(t *testing.T) {
		t.Parallel()
		r := startRelay(t)
		_ = r.node.Close()
		if code, _ := tunneltest.ReadAbort(t, r.client); code != tunnel.CodeGatewayLost {
			t.Errorf("client got %d, want %d", code, tunnel.CodeGatewayLost)
		}
		if e := <-r.ended; e.code != tunnel.CodeGatewayLost {
			t.Errorf("relay ended with %d %q", e.code, e.reason)
		}
	})
	t.Run("client stream ends without closing", func(t *testing.T) {
		t.Parallel()
		client, a, rawClient, _ := tunneltest.StreamPair()
		b, node, _, _ := tunneltest.StreamPair()
		relay := tunnelhop.NewRelay(a, b, tunnel.CodeReset, tunnel.CodeGatewayLost)
		done := make(chan ended, 1)
		go func() { c, why := relay.Run(); done <- ended{c, why} }()
		_ = rawClient.W.Close() // a clean EOF between frames, without a CloseWrite frame
		for i, s := range []tunnel.Stream{client, node} {
			if code, _ := tunneltest.ReadAbort(t, s); code != tunnel.CodeReset {
				t.Errorf("end %d got %d, want the client's lost code %d", i, code, tunnel.CodeReset)
			}
		}
		if _, err := node.ReadFrame(); !errors.Is(err, tunneltest.ErrTorn) {
			t.Errorf("the node's stream after the abort: %v, want it torn down", err)
		}
		if e := <-done; e.code != tunnel.CodeReset {
			t.Errorf("relay ended with %d %q", e.code, e.reason)
		}
	})
	t.Run("malformed frame", func(t *testing.T) {
		t.Parallel()
		client, a, rawClient, _ := tunneltest.StreamPair()
		b, node, _, _ := tunneltest.StreamPair()
		relay := tunnelhop.NewRelay(a, b, tunnel.CodeReset, tunnel.CodeGatewayLost)
		done := make(chan ended, 1)
		go func() { c, why := relay.Run(); done <- ended{c, why} }()
		go func() { _, _ = rawClient.W.Write([]byte{7, 0, 0, 0, 1, 0}) }()
		if code, _ := tunneltest.ReadAbort(t, client); code != tunnel.CodeProtocol {
			t.Errorf("client got %d, want %d", code, tunnel.CodeProtocol)
		}
		if code, _ := tunneltest.ReadAbort(t, node); code != tunnel.CodeProtocol {
			t.Errorf("node got %d, want %d", code, tunnel.CodeProtocol)
		}
		if e := <-done; e.code != tunnel.CodeProtocol {
			t.Errorf("relay ended with %d %q", e.code, e.reason)
		}
	})
}
