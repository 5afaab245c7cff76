package wsnet_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/better-compute/better-compute/internal/wsnet"
)

// serve mounts a Listener with backlog on a test server and returns it and its ws:// URL.
func serve(t *testing.T, backlog int) (*wsnet.Listener, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	l := wsnet.NewListener(srv.Listener.Addr(), backlog)
	srv.Config.Handler = l
	srv.Start()
	t.Cleanup(func() { l.Shutdown(); srv.Close() })
	return l, "ws://" + srv.Listener.Addr().String() + wsnet.DefaultPath
}

// TestBytesBothWays: what one side writes the other reads, through a Listener and Dial, and
// the accepted connection is known to have come over a WebSocket, also inside TLS.
func TestBytesBothWays(t *testing.T) {
	t.Parallel()
	l, url := serve(t, 0)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	c, err := wsnet.Dial(ctx, url, wsnet.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var s net.Conn
	select {
	case s = <-accepted:
	case <-ctx.Done():
		t.Fatal("nothing accepted")
	}
	defer s.Close()
	if !wsnet.Over(s) || !wsnet.Over(tls.Server(s, &tls.Config{})) {
		t.Error("the accepted connection is not known to be a WebSocket")
	}
	if wsnet.Over(c) {
		t.Error("a dialled connection counts as accepted")
	}
	msg := strings.Repeat("stream ", 10_000)
	go func() { _, _ = io.WriteString(c, msg); _ = c.Close() }()
	got, err := io.ReadAll(s)
	if err != nil || string(got) != msg {
		t.Fatalf("read %d bytes (%v), want %d", len(got), err, len(msg))
	}
}

// TestRefusals: a full backlog and a closed listener refuse upgrades with 503 before upgrading;
// a WebSocket of another subprotocol, or of none, is refused with 400 before upgrading; a dial to
// a server that is not a Listener fails.
func TestRefusals(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	l, url := serve(t, 1)
	first, err := wsnet.Dial(ctx, url, wsnet.DialOptions{}) // waits in the backlog
	if err != nil {
		t.Fatal(err)
	}
	_, err = wsnet.Dial(ctx, url, wsnet.DialOptions{})
	var ue *wsnet.UpgradeError
	if !errors.As(err, &ue) || ue.Status != http.StatusServiceUnavailable {
		t.Errorf("dial past the backlog: %v, want 503", err)
	}
	_ = l.Close()
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v", err)
	}
	// The one waiting in the backlog was never accepted: Close closed it.
	if _, err := io.ReadAll(first); err != nil {
		t.Errorf("the connection in the backlog: %v, want it closed (EOF)", err)
	}
	_ = first.Close()
	if _, err := wsnet.Dial(ctx, url, wsnet.DialOptions{}); !errors.As(err, &ue) || ue.Status != http.StatusServiceUnavailable {
		t.Errorf("dial after Close: %v, want 503", err)
	}

	_, url = serve(t, 0)
	for _, protocols := range [][]string{{"chat"}, nil} {
		ws, res, err := websocket.Dial(ctx, url, &websocket.DialOptions{Subprotocols: protocols})
		if res != nil && res.Body != nil {
			_ = res.Body.Close()
		}
		if err == nil {
			_ = ws.CloseNow()
			t.Errorf("subprotocols %q: upgraded, want 400 before any upgrade", protocols)
		} else if res == nil || res.StatusCode != http.StatusBadRequest {
			t.Errorf("subprotocols %q: %v, want 400", protocols, err)
		}
	}

	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	if _, err := wsnet.Dial(ctx, "ws"+strings.TrimPrefix(plain.URL, "http")+"/x", wsnet.DialOptions{}); !errors.As(err, &ue) || ue.Status != http.StatusNotFound {
		t.Errorf("dial to a plain server: %v, want 404", err)
	}
	if _, err := wsnet.Dial(ctx, "https://example.com/x", wsnet.DialOptions{}); err == nil {
		t.Error("an https URL was dialled")
	}
}
