package wsnet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coder/websocket"
)

// DialOptions configure Dial.
type DialOptions struct {
	// Proxy chooses the HTTP proxy of a request, as http.Transport's does
	// (http.ProxyFromEnvironment honours HTTPS_PROXY, HTTP_PROXY and NO_PROXY); nil dials
	// directly. A wss:// URL goes through a proxy's CONNECT; a ws:// one is forwarded by it.
	Proxy func(*http.Request) (*url.URL, error)
	// TLS verifies the server of a wss:// URL (or the proxy's answer in its place, when it
	// inspects TLS); the system's roots when nil. It is the outer TLS only: what the stream
	// carries is checked by whoever reads it.
	TLS *tls.Config
	// DialContext opens the TCP connection to the proxy or the server; a net.Dialer's when nil.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
}

// handshakeHeaderBytes bounds the upgrade's response headers (a proxy's, possibly).
const handshakeHeaderBytes = 64 << 10

// UpgradeError is a refused upgrade: the server or a proxy answered with another status.
type UpgradeError struct {
	Status int
	// Body is the start of the answer's body, for the log.
	Body string
}

func (e *UpgradeError) Error() string {
	msg := fmt.Sprintf("the WebSocket upgrade was answered %d %s", e.Status, http.StatusText(e.Status))
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// Dial opens a WebSocket of Subprotocol at rawURL (ws:// or wss://) and returns it as a
// net.Conn whose lifetime is its own (ctx bounds only the dial).
func Dial(ctx context.Context, rawURL string, o DialOptions) (net.Conn, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
		return nil, fmt.Errorf("websocket URL %q: must be ws:// or wss:// with a host", rawURL)
	}
	tr := &http.Transport{
		Proxy:                  o.Proxy,
		DialContext:            o.DialContext,
		TLSClientConfig:        o.TLS,
		Protocols:              new(http.Protocols),
		TLSHandshakeTimeout:    30 * time.Second,
		ResponseHeaderTimeout:  30 * time.Second,
		MaxResponseHeaderBytes: handshakeHeaderBytes,
		DisableKeepAlives:      true,
	}
	// An upgrade is HTTP/1.1 (RFC 8441's WebSockets over HTTP/2 are rare in proxies).
	tr.Protocols.SetHTTP1(true)
	defer tr.CloseIdleConnections()
	ws, res, err := websocket.Dial(ctx, u.String(), &websocket.DialOptions{
		HTTPClient:      &http.Client{Transport: tr},
		Subprotocols:    []string{Subprotocol},
		CompressionMode: websocket.CompressionDisabled,
	})
	if res != nil && res.Body != nil {
		defer res.Body.Close()
	}
	if err != nil {
		if res != nil && res.StatusCode != http.StatusSwitchingProtocols {
			body, _ := io.ReadAll(io.LimitReader(res.Body, 256))
			return nil, fmt.Errorf("websocket %s: %w", u.Redacted(), &UpgradeError{Status: res.StatusCode, Body: strings.TrimSpace(string(body))})
		}
		return nil, fmt.Errorf("websocket %s: %w", u.Redacted(), err)
	}
	if p := ws.Subprotocol(); p != Subprotocol {
		_ = ws.Close(websocket.StatusProtocolError, "subprotocol "+Subprotocol+" is required")
		return nil, fmt.Errorf("websocket %s: %w", u.Redacted(), errors.New("the server answered without subprotocol "+Subprotocol))
	}
	return websocket.NetConn(context.WithoutCancel(ctx), ws, websocket.MessageBinary), nil
}
