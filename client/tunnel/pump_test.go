package tunnel_test

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/better-compute/better-compute/client/tunnel"
	"github.com/better-compute/better-compute/client/tunneltest"
)

// loopback returns a loopback listener closed when the test ends.
func loopback(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// tcpPair returns both ends of a loopback TCP connection.
func tcpPair(t *testing.T) (dialed, accepted *net.TCPConn) {
	t.Helper()
	ln := loopback(t)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// TestPumpHalfClose: a client's bytes cross two Pumps to a server on TCP loopback and back; the
// client's EOF reaches the server as EOF, and the bytes the server writes after it (the
// "bye" after its echo) still reach the client before its EOF. Both Pumps end cleanly.
func TestPumpHalfClose(t *testing.T) {
	t.Parallel()
	// The port on the node: echo until EOF, then say goodbye and close.
	origin := loopback(t)
	go func() {
		c, err := origin.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = io.Copy(c, c)
		_, _ = c.Write([]byte("bye"))
	}()
	user, clientEnd := tcpPair(t) // the user's connection to the client's local port
	nodeEnd, err := net.Dial("tcp", origin.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a, b, _, _ := tunneltest.StreamPair()
	pumps := make(chan error, 2)
	go func() { pumps <- tunnel.Pump(clientEnd, a) }()
	go func() { pumps <- tunnel.Pump(nodeEnd.(*net.TCPConn), b) }()

	sent := make([]byte, 1<<20+17) // over many frames, not a multiple of their size
	_, _ = rand.Read(sent)
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := user.Write(sent); err != nil {
			t.Errorf("write: %v", err)
		}
		if err := user.CloseWrite(); err != nil {
			t.Errorf("close write: %v", err)
		}
	})
	got, err := io.ReadAll(user)
	wg.Wait()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if want := append(sent, "bye"...); !bytes.Equal(got, want) {
		t.Fatalf("got %d bytes, want %d (the echo, then bye)", len(got), len(want))
	}
	for range 2 {
		if err := <-pumps; err != nil {
			t.Errorf("pump: %v", err)
		}
	}
}

// TestPumpReset: the server resetting its connection aborts the tunnel: the client's Pump
// returns an abort with CodeReset, and the client's connection is closed, not left hanging.
func TestPumpReset(t *testing.T) {
	t.Parallel()
	origin := loopback(t)
	// The reset waits for the dial to return: a reset that lands before it makes the dial
	// itself fail (connect's pending error), which a loaded machine showed.
	dialed := make(chan struct{})
	go func() {
		c, err := origin.Accept()
		if err != nil {
			return
		}
		<-dialed
		_ = c.(*net.TCPConn).SetLinger(0) // close with a reset
		c.Close()
	}()
	user, clientEnd := tcpPair(t)
	nodeEnd, err := net.Dial("tcp", origin.Addr().String())
	close(dialed)
	if err != nil {
		t.Fatal(err)
	}
	a, b, _, _ := tunneltest.StreamPair()
	client := make(chan error, 1)
	node := make(chan error, 1)
	go func() { client <- tunnel.Pump(clientEnd, a) }()
	go func() { node <- tunnel.Pump(nodeEnd.(*net.TCPConn), b) }()

	var ae *tunnel.AbortError
	if err := <-client; !errors.As(err, &ae) || ae.Code != tunnel.CodeReset {
		t.Errorf("the client's pump: %v, want an abort with %d", err, tunnel.CodeReset)
	}
	if err := <-node; err == nil {
		t.Error("the node's pump ended cleanly after a reset")
	}
	if _, err := io.ReadAll(user); err != nil && !errors.Is(err, net.ErrClosed) {
		t.Logf("the user's connection ended with %v", err) // a reset is fine too
	}
}

// TestPumpPeerAbort: an Abort frame from the peer ends the Pump with that code and reason and
// closes the local connection; a malformed frame ends it with a protocol error, and the peer is
// told with an Abort frame of CodeProtocol.
func TestPumpPeerAbort(t *testing.T) {
	t.Parallel()
	t.Run("abort", func(t *testing.T) {
		t.Parallel()
		user, local := tcpPair(t)
		s, peer, _, _ := tunneltest.StreamPair()
		done := make(chan error, 1)
		go func() { done <- tunnel.Pump(local, s) }()
		go func() {
			_ = peer.WriteFrame(tunnel.Frame{Type: tunnel.Abort, Payload: tunnel.AbortPayload(tunnel.CodePortRefused, "port 22 is not allowed")})
			// Drain what the Pump sends back (its own Abort frame) until it tears the stream down.
			for {
				if _, err := peer.ReadFrame(); err != nil {
					return
				}
			}
		}()
		var ae *tunnel.AbortError
		if err := <-done; !errors.As(err, &ae) || ae.Code != tunnel.CodePortRefused || ae.Reason != "port 22 is not allowed" {
			t.Errorf("pump: %v, want the peer's abort", err)
		}
		if _, err := io.ReadAll(user); err != nil {
			t.Errorf("the local connection was not closed cleanly: %v", err)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		t.Parallel()
		_, local := tcpPair(t)
		s, _, _, raw := tunneltest.StreamPair()
		done := make(chan error, 1)
		go func() { done <- tunnel.Pump(local, s) }()
		go func() { _, _ = raw.W.Write([]byte{9, 0, 0, 0, 0}) }()
		f, err := tunnel.NewFrameReader(raw.R).Read()
		if code, _ := tunnel.ParseAbort(f.Payload); err != nil || f.Type != tunnel.Abort || code != tunnel.CodeProtocol {
			t.Errorf("the peer got type %d code %d, %v; want an abort with %d", f.Type, code, err, tunnel.CodeProtocol)
		}
		if err := <-done; !errors.Is(err, tunnel.ErrProtocol) {
			t.Errorf("pump: %v, want a protocol error", err)
		}
	})
}
