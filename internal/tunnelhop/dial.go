package tunnelhop

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/better-compute/better-compute/client/tunnel"
	gatewayv1 "github.com/better-compute/better-compute/gen/go/bettercompute/gateway/v1"
	"github.com/better-compute/better-compute/internal/scrub"
)

// The API's side of the control hop: it streams a tunnel to the gateway that holds the node's
// session, POST ControlPath on the gateway's control API (HTTP/2, mutual TLS from the internal
// CA), naming the tunnel in the header HeaderOpen (a protobuf OpenTunnelRequest). The request
// body carries the frames towards the node and the response body the frames from it; the
// gateway answers 200 only once the node's daemon opened its own stream, and refuses with
// another status before that (503 no session there, 504 the daemon did not answer).

// InternalAuthority issues the API's client certificate for the control API and says which CA
// the gateways' certificates come from (*pki.Bundle provides it).
type InternalAuthority interface {
	IssueInternal(name string, dnsNames []string, ips []net.IP) (certPEM, keyPEM []byte, err error)
	InternalCAPool() *x509.CertPool
}

// dialHeaderTimeout bounds the wait for the gateway's answer: its own wait for the daemon
// (OpenTimeout), and some slack for the round trips.
const dialHeaderTimeout = OpenTimeout + 5*time.Second

// drainGrace bounds how long Close waits for the request body's last frame (a CloseWrite or an
// Abort) to leave before it resets the stream.
const drainGrace = time.Second

// Dialer opens tunnels' control streams to gateways. Its tunnels to one gateway share HTTP/2
// connections, with the flow-control windows StreamWindow and ConnWindow.
type Dialer struct {
	client *http.Client
}

// NewDialer returns a dialer whose client certificate ia issues (the internal identity "api").
func NewDialer(ia InternalAuthority) (*Dialer, error) {
	certPEM, keyPEM, err := ia.IssueInternal("api", nil, nil)
	if err != nil {
		return nil, fmt.Errorf("tunnel: issue the API's internal certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("tunnel: the API's internal certificate: %w", err)
	}
	return NewDialerTLS(&tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: ia.InternalCAPool()}), nil
}

// NewDialerTLS returns a dialer that connects with cfg (its client certificate and the roots it
// trusts); NewDialer is the usual way.
func NewDialerTLS(cfg *tls.Config) *Dialer {
	var protocols http.Protocols
	protocols.SetHTTP2(true) // a tunnel is full duplex: HTTP/1.1 cannot carry it
	tr := &http.Transport{
		TLSClientConfig:       cfg.Clone(),
		Protocols:             &protocols,
		ForceAttemptHTTP2:     true,
		ResponseHeaderTimeout: dialHeaderTimeout,
		TLSHandshakeTimeout:   10 * time.Second,
		HTTP2: &http.HTTP2Config{
			MaxReceiveBufferPerStream:     StreamWindow,
			MaxReceiveBufferPerConnection: ConnWindow,
			MaxReadFrameSize:              MaxFrameSize,
			// A gateway that vanished without closing its connections is found by pings, so
			// its tunnels end (CodeGatewayLost) instead of hanging.
			SendPingTimeout: 15 * time.Second,
			PingTimeout:     15 * time.Second,
		},
	}
	return &Dialer{client: &http.Client{Transport: tr}}
}

// DialError is a gateway's refusal of a tunnel before any frame: its HTTP status and reason.
type DialError struct {
	Status int
	Reason string
}

func (e *DialError) Error() string {
	return fmt.Sprintf("the gateway refused the tunnel: HTTP %d: %s", e.Status, e.Reason)
}

// Code is the close code a client sees for the refusal: the node is offline or did not answer
// (503, 504), else a fault in the control plane.
func (e *DialError) Code() tunnel.Code {
	switch e.Status {
	case http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return tunnel.CodeNodeOffline
	}
	return tunnel.CodeInternal
}

// Dial opens the control stream of tunnel id to port on node through the gateway whose control
// API is at controlURL, and returns it once the gateway answered 200 (the daemon's stream is
// there). A refusal is a *DialError; a gateway that cannot be reached, or a port outside 1 to
// 65535 (which no gateway takes), is another error. ctx bounds the whole stream: cancelling it
// tears the stream down. The stream's CloseSend ends the request body; Close lets its last
// frame leave (at most a second), then resets the stream.
func (d *Dialer) Dial(ctx context.Context, controlURL, id, node string, port int) (*tunnel.ByteStream, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("tunnel: port %d: want 1 to 65535", port)
	}
	open, err := EncodeOpen(&gatewayv1.OpenTunnelRequest{TunnelId: id, NodeId: node, Port: int32(port)})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	pr, pw := io.Pipe()
	body := &sentBody{r: pr, done: make(chan struct{})}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(controlURL, "/")+ControlPath, body)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("tunnel: control URL %q: %w", controlURL, err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set(HeaderOpen, open)
	res, err := d.client.Do(req)
	if err != nil {
		cancel()
		_ = pw.Close()
		return nil, fmt.Errorf("tunnel: stream to the gateway at %s: %w", controlURL, err)
	}
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		_ = res.Body.Close()
		cancel()
		_ = pw.Close()
		return nil, &DialError{Status: res.StatusCode, Reason: firstLine(string(b), http.StatusText(res.StatusCode))}
	}
	var once sync.Once
	closeAll := func() error {
		once.Do(func() {
			// Let the last frame written (the relay's CloseWrite or Abort) leave before the
			// reset: the transport has taken it from the pipe, but may not have sent it yet.
			_ = pw.Close()
			t := time.NewTimer(drainGrace)
			select {
			case <-body.done:
			case <-t.C:
			}
			t.Stop()
			cancel()
			_ = res.Body.Close()
		})
		return nil
	}
	return tunnel.NewByteStream(res.Body, pw, nil, pw.Close, closeAll), nil
}

// sentBody is a request body that says when the transport read it to its end (so every frame
// written before the pipe closed has been handed to the connection), or closed it.
type sentBody struct {
	r    *io.PipeReader
	once sync.Once
	done chan struct{}
}

func (b *sentBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil {
		b.once.Do(func() { close(b.done) })
	}
	return n, err
}

func (b *sentBody) Close() error {
	b.once.Do(func() { close(b.done) })
	return b.r.Close()
}

// firstLine is the first line of a refusal's text body, bounded, or def.
func firstLine(s, def string) string {
	s, _, _ = strings.Cut(s, "\n")
	s = scrub.Truncate(strings.TrimSpace(s), 200)
	if s == "" {
		return def
	}
	return s
}
