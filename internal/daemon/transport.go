package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/wsnet"
)

// Transport is how a daemon reaches its gateway (bcd run --transport).
type Transport string

// Transports a daemon may be told to use.
const (
	// TransportH2 dials the gateway's listener directly: HTTP/2 over mutual TLS. The default.
	TransportH2 Transport = "h2"
	// TransportWebSocket carries the same TLS session inside a WebSocket to the gateway's
	// WebSocket listener, through the HTTP proxy the environment names (HTTPS_PROXY, NO_PROXY).
	TransportWebSocket Transport = "websocket"
	// TransportAuto dials directly and falls back to the WebSocket when the direct path fails
	// the way a proxy or a middlebox makes it fail (see proxyCaused); it remembers the
	// fallback and tries the direct path again every RetryDirect.
	TransportAuto Transport = "auto"
)

// ParseTransport reads a --transport value.
func ParseTransport(s string) (Transport, error) {
	switch t := Transport(s); t {
	case TransportH2, TransportWebSocket, TransportAuto:
		return t, nil
	case "":
		return TransportH2, nil
	default:
		return "", fmt.Errorf("transport %q: want auto, h2 or websocket", s)
	}
}

// DefaultRetryDirect is how long a daemon that fell back to the WebSocket keeps to it before it
// tries the direct path again.
const DefaultRetryDirect = time.Hour

// directTimeout bounds a direct attempt of TransportAuto, so that a firewall that drops the
// packets costs a fallback this long rather than the whole dial's timeout.
const directTimeout = 10 * time.Second

// ErrUnexpectedALPN is a handshake whose server did not agree to HTTP/2: a proxy or middlebox
// answered in the gateway's place.
var ErrUnexpectedALPN = errors.New("the server did not negotiate h2")

// Choice is what TransportAuto has learned: whether the direct path failed, and since when. It
// is shared by every connection a daemon makes (session, data plane, renewals), and kept in a
// file when Path is set, so that a restarted daemon does not first wait on a path known to fail.
// The zero value is ready to use.
type Choice struct {
	// Path, when set, is where the choice is kept (bcd's state directory).
	Path string
	// RetryDirect is how long a fallback lasts (DefaultRetryDirect when zero).
	RetryDirect time.Duration

	mu     sync.Mutex
	loaded bool
	state  choiceState
}

// choiceState is the kept form of a Choice.
type choiceState struct {
	// WebSocketSince is when the direct path last failed as a proxy makes it fail; zero while
	// the direct path is in use.
	WebSocketSince time.Time `json:"websocketSince,omitzero"`
	// Reason is that failure.
	Reason string `json:"reason,omitempty"`
}

// Current is the transport the next connection uses first, and since when, when it is the
// WebSocket.
func (c *Choice) Current() (fleet.Transport, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.load()
	if c.state.WebSocketSince.IsZero() {
		return fleet.TransportH2, time.Time{}
	}
	return fleet.TransportWebSocket, c.state.WebSocketSince
}

// retryAt is when the direct path is due to be tried again; zero while it is in use.
func (c *Choice) retryAt() time.Time {
	_, since := c.Current()
	if since.IsZero() {
		return time.Time{}
	}
	return since.Add(c.retryDirect())
}

func (c *Choice) retryDirect() time.Duration {
	if c.RetryDirect > 0 {
		return c.RetryDirect
	}
	return DefaultRetryDirect
}

// webSocketFirst says whether a connection should go straight to the WebSocket.
func (c *Choice) webSocketFirst(now time.Time) bool {
	at := c.retryAt()
	return !at.IsZero() && now.Before(at)
}

// fellBack records that the direct path failed with err.
func (c *Choice) fellBack(now time.Time, err error) {
	c.set(choiceState{WebSocketSince: now, Reason: err.Error()})
}

// direct records that the direct path works.
func (c *Choice) direct() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.load()
	if c.state.WebSocketSince.IsZero() {
		return
	}
	c.state = choiceState{}
	c.save()
}

func (c *Choice) set(s choiceState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loaded, c.state = true, s
	c.save()
}

// load reads the kept choice once; a missing or unreadable file is the direct path.
func (c *Choice) load() {
	if c.loaded {
		return
	}
	c.loaded = true
	if c.Path == "" {
		return
	}
	b, err := os.ReadFile(c.Path)
	if err != nil || len(b) > 4096 {
		return
	}
	var s choiceState
	if json.Unmarshal(b, &s) == nil {
		c.state = s
	}
}

// save keeps the choice (write to a temporary file, then rename). A failure only costs the
// next process a direct attempt.
func (c *Choice) save() {
	if c.Path == "" {
		return
	}
	b, err := json.Marshal(c.state)
	if err != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(c.Path), ".transport-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr != nil || cerr != nil {
		_ = os.Remove(tmp.Name())
		return
	}
	if os.Rename(tmp.Name(), c.Path) != nil {
		_ = os.Remove(tmp.Name())
	}
}

// dialFunc opens a plain connection (net.Dialer.DialContext's signature).
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// dialTLS returns the DialTLSContext of a daemon's transports: the gateway's TLS (cfg), over
// a direct connection made by dial or inside a WebSocket, as d.Transport says. rootPEM is the
// deployment's root, which the WebSocket's outer TLS also trusts.
func (d Dialer) dialTLS(cfg *tls.Config, rootPEM []byte, dial dialFunc) dialFunc {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		switch d.Transport {
		case TransportWebSocket:
			return d.overWebSocket(ctx, cfg, rootPEM, dial)
		case TransportAuto:
			return d.auto(ctx, network, addr, cfg, rootPEM, dial)
		default:
			return handshake(ctx, cfg, addr, func(ctx context.Context) (net.Conn, error) { return dial(ctx, network, addr) })
		}
	}
}

// auto is TransportAuto's dial: the WebSocket while a fallback lasts, else the direct path,
// then the WebSocket if the direct path failed the way a proxy makes it fail.
func (d Dialer) auto(ctx context.Context, network, addr string, cfg *tls.Config, rootPEM []byte, dial dialFunc) (net.Conn, error) {
	choice := d.choice()
	if choice.webSocketFirst(time.Now()) {
		return d.overWebSocket(ctx, cfg, rootPEM, dial)
	}
	dctx, cancel := context.WithTimeout(ctx, directTimeout)
	c, err := handshake(dctx, cfg, addr, func(ctx context.Context) (net.Conn, error) { return dial(ctx, network, addr) })
	cancel()
	if err == nil {
		choice.direct()
		return c, nil
	}
	if ctx.Err() != nil || !proxyCaused(err) {
		return nil, err
	}
	c, werr := d.overWebSocket(ctx, cfg, rootPEM, dial)
	if werr != nil {
		return nil, fmt.Errorf("direct: %w; and over the WebSocket: %w", err, werr)
	}
	choice.fellBack(time.Now(), err)
	return c, nil
}

// overWebSocket opens the WebSocket and runs the gateway's TLS inside it.
func (d Dialer) overWebSocket(ctx context.Context, cfg *tls.Config, rootPEM []byte, dial dialFunc) (net.Conn, error) {
	u, err := d.webSocketURL()
	if err != nil {
		return nil, err
	}
	return handshake(ctx, cfg, d.Gateway, func(ctx context.Context) (net.Conn, error) {
		return wsnet.Dial(ctx, u, wsnet.DialOptions{Proxy: d.proxy(), TLS: d.outerTLS(rootPEM), DialContext: dial})
	})
}

// choice is the Dialer's Choice; a fresh one, which remembers nothing, when it has none.
func (d Dialer) choice() *Choice {
	if d.Choice != nil {
		return d.Choice
	}
	return &Choice{}
}

// handshake runs cfg's TLS over the connection open makes, named for addr's host unless cfg
// names the server, and insists on HTTP/2.
func handshake(ctx context.Context, cfg *tls.Config, addr string, open func(context.Context) (net.Conn, error)) (net.Conn, error) {
	raw, err := open(ctx)
	if err != nil {
		return nil, err
	}
	cfg = cfg.Clone()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg.ServerName = host
	}
	tc := tls.Client(raw, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = raw.Close()
		return nil, err
	}
	if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
		_ = tc.Close()
		return nil, fmt.Errorf("%w (it chose %q)", ErrUnexpectedALPN, p)
	}
	return tc, nil
}

// proxyCaused says whether a direct attempt failed the way an HTTP proxy or a middlebox makes
// it fail, so that the WebSocket may get through where it did not: refused or reset, no answer
// in time, an answer that is not TLS (an HTTP proxy's), a certificate from an authority the
// node does not know or for another name (an inspecting proxy's), or no HTTP/2. A gateway
// that refuses the node (revoked, another trust domain) is not: the WebSocket leads to it too.
func proxyCaused(err error) bool {
	var rh tls.RecordHeaderError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, ErrUnexpectedALPN):
		return true
	case errors.As(err, &rh), errors.As(err, &ua), errors.As(err, &hn):
		return true
	case errors.As(err, &ne) && ne.Timeout():
		return true
	}
	var alert tls.AlertError
	return errors.As(err, &alert) && alert == 120 // no_application_protocol
}

// webSocketURL is the gateway's WebSocket listener: WebSocketURL, else wss:// on port 443 of
// the gateway's host at wsnet.DefaultPath.
func (d Dialer) webSocketURL() (string, error) {
	if d.WebSocketURL != "" {
		return d.WebSocketURL, nil
	}
	host, _, err := net.SplitHostPort(d.Gateway)
	if err != nil {
		return "", fmt.Errorf("gateway %q: %w", d.Gateway, err)
	}
	return "wss://" + net.JoinHostPort(host, "443") + wsnet.DefaultPath, nil
}

// proxy is the WebSocket's HTTP proxy: Proxy, else the environment's.
func (d Dialer) proxy() func(*http.Request) (*url.URL, error) {
	if d.Proxy != nil {
		return d.Proxy
	}
	return http.ProxyFromEnvironment
}

// outerTLS verifies the WebSocket's outer TLS against WebSocketRootCAs, else the system's
// roots and the deployment's root, so that both a public certificate on a load
// balancer and the gateway's own pass. The outer TLS proves nothing about the gateway; the
// TLS inside does.
func (d Dialer) outerTLS(rootPEM []byte) *tls.Config {
	roots := d.WebSocketRootCAs
	if roots == nil {
		sys, err := x509.SystemCertPool()
		if err != nil || sys == nil {
			sys = x509.NewCertPool()
		}
		sys.AppendCertsFromPEM(rootPEM)
		roots = sys
		if len(d.pins) > 0 {
			// FetchRoot: the root is not known yet, only its pin.
			return outerPinned(&tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}, roots, d.pins)
		}
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: roots, NextProtos: []string{"http/1.1"}}
}
