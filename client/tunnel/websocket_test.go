package tunnel_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/better-compute/better-compute/client/tunnel"
	"github.com/better-compute/better-compute/client/tunneltest"
)

// wsPair opens a WebSocket of the tunnel subprotocol to an httptest server and returns both
// ends as streams, and the client's raw connection, for messages a stream would not send.
func wsPair(t *testing.T) (client, server *tunnel.WebSocketStream, raw *websocket.Conn) {
	t.Helper()
	accepted := make(chan *tunnel.WebSocketStream, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := websocket.Accept(w, r, &websocket.AcceptOptions{Subprotocols: []string{tunnel.Subprotocol}})
		if err != nil {
			t.Errorf("accept: %v", err)
			return
		}
		accepted <- tunnel.NewWebSocketStream(t.Context(), c)
		<-t.Context().Done()
	}))
	t.Cleanup(srv.Close)
	c, res, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http"), &websocket.DialOptions{Subprotocols: []string{tunnel.Subprotocol}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Body != nil {
		res.Body.Close()
	}
	if c.Subprotocol() != tunnel.Subprotocol {
		t.Fatalf("subprotocol %q", c.Subprotocol())
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	return tunnel.NewWebSocketStream(t.Context(), c), <-accepted, c
}

// TestWebSocketStream: frames cross a WebSocket as messages, up to the payload bound; a normal
// closure reads as io.EOF and another close code as an abort with that code and reason.
func TestWebSocketStream(t *testing.T) {
	t.Parallel()
	t.Run("frames", func(t *testing.T) {
		t.Parallel()
		client, server, _ := wsPair(t)
		big := bytes.Repeat([]byte{0x5a}, tunnel.MaxPayload)
		go func() {
			for _, f := range []tunnel.Frame{{Type: tunnel.Data, Payload: []byte("hello")}, {Type: tunnel.Data, Payload: big}, {Type: tunnel.CloseWrite}} {
				if err := client.WriteFrame(f); err != nil {
					t.Errorf("write: %v", err)
				}
			}
		}()
		if got := tunneltest.MustRead(t, server, tunnel.Data); string(got) != "hello" {
			t.Errorf("got %q", got)
		}
		if got := tunneltest.MustRead(t, server, tunnel.Data); !bytes.Equal(got, big) {
			t.Errorf("got %d bytes", len(got))
		}
		tunneltest.MustRead(t, server, tunnel.CloseWrite)
		// The other way, then a normal closure.
		go func() {
			_ = server.WriteFrame(tunnel.Frame{Type: tunnel.Data, Payload: []byte("bye")})
			_ = server.Close()
		}()
		if got := tunneltest.MustRead(t, client, tunnel.Data); string(got) != "bye" {
			t.Errorf("got %q", got)
		}
		if _, err := client.ReadFrame(); !errors.Is(err, io.EOF) {
			t.Errorf("after a normal closure: %v, want io.EOF", err)
		}
	})
	t.Run("close code", func(t *testing.T) {
		t.Parallel()
		client, server, _ := wsPair(t)
		go func() { _ = server.CloseWith(tunnel.CodeLeaseEnded, "lease ended") }()
		_, err := client.ReadFrame()
		var ae *tunnel.AbortError
		if !errors.As(err, &ae) || ae.Code != tunnel.CodeLeaseEnded || ae.Reason != "lease ended" {
			t.Errorf("got %v, want an abort with %d", err, tunnel.CodeLeaseEnded)
		}
	})
	t.Run("oversized message", func(t *testing.T) {
		t.Parallel()
		_, server, raw := wsPair(t)
		go func() { _ = raw.Write(t.Context(), websocket.MessageBinary, make([]byte, 1+tunnel.MaxPayload+1)) }()
		if _, err := server.ReadFrame(); !errors.Is(err, tunnel.ErrProtocol) {
			t.Errorf("a message over the bound: %v, want a protocol error", err)
		}
	})
	t.Run("text message", func(t *testing.T) {
		t.Parallel()
		_, server, raw := wsPair(t)
		go func() { _ = raw.Write(t.Context(), websocket.MessageText, []byte("hello")) }()
		if _, err := server.ReadFrame(); !errors.Is(err, tunnel.ErrProtocol) {
			t.Errorf("a text message: %v, want a protocol error", err)
		}
	})
	t.Run("empty message", func(t *testing.T) {
		t.Parallel()
		_, server, raw := wsPair(t)
		go func() { _ = raw.Write(t.Context(), websocket.MessageBinary, nil) }()
		if _, err := server.ReadFrame(); !errors.Is(err, tunnel.ErrProtocol) {
			t.Errorf("an empty message: %v, want a protocol error", err)
		}
	})
}
