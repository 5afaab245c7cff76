package host

import (
	"cmp"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"

	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/daemon/state"
)

// TransportOptions choose how bcd reaches its gateway (bcd join and bcd run --transport,
// --websocket-url, --websocket-ca-file). The WebSocket's HTTP proxy is the environment's:
// HTTPS_PROXY (or HTTP_PROXY for a ws:// URL), with NO_PROXY's exceptions.
type TransportOptions struct {
	// Transport is auto, h2 or websocket; empty: what the node joined with (h2 for join).
	Transport string
	// WebSocketURL is the gateway's WebSocket listener (ws:// or wss://); empty: what the node
	// joined with, else wss:// on port 443 of the gateway's host.
	WebSocketURL string
	// WebSocketCAFile verifies the WebSocket's outer TLS (PEM), for a proxy or load balancer
	// whose certificate neither the system nor the deployment's root signs. bcd join keeps a
	// copy in the state directory (state.WebSocketCAFile), which bcd run uses when not given one.
	WebSocketCAFile string
}

// dialer configures d with the options, over what the node recorded at join (node), and keeps
// auto's choice in the state directory.
func (o TransportOptions) dialer(d daemon.Dialer, node state.Node, dir *state.Dir) (daemon.Dialer, error) {
	choose := o.Transport
	if choose == "" {
		choose = node.Transport
	}
	t, err := daemon.ParseTransport(choose)
	if err != nil {
		return d, fmt.Errorf("--transport: %w", err)
	}
	d.Transport = t
	d.WebSocketURL = o.WebSocketURL
	if d.WebSocketURL == "" {
		d.WebSocketURL = node.WebSocketURL
	}
	if d.WebSocketURL != "" {
		if u, err := url.Parse(d.WebSocketURL); err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
			return d, fmt.Errorf("--websocket-url %q: want ws:// or wss:// with a host", d.WebSocketURL)
		}
	}
	pem, err := o.webSocketCA(node, dir)
	if err != nil {
		return d, err
	}
	if pem != nil {
		d.WebSocketRootCAs = x509.NewCertPool()
		if !d.WebSocketRootCAs.AppendCertsFromPEM(pem) {
			return d, fmt.Errorf("WebSocket CA %s: no PEM certificate in it", cmp.Or(o.WebSocketCAFile, dir.File(state.WebSocketCAFile)))
		}
	}
	if t == daemon.TransportAuto {
		d.Choice = &daemon.Choice{Path: dir.File(state.TransportFile)}
	}
	return d, nil
}

// webSocketCA is the PEM of --websocket-ca-file, else (for a node that has joined) the one kept
// at join in the state directory; nil when neither.
func (o TransportOptions) webSocketCA(node state.Node, dir *state.Dir) ([]byte, error) {
	if o.WebSocketCAFile != "" {
		pem, err := os.ReadFile(o.WebSocketCAFile)
		if err != nil {
			return nil, fmt.Errorf("--websocket-ca-file: %w", err)
		}
		return pem, nil
	}
	if node.NodeID == "" {
		return nil, nil
	}
	pem, err := dir.WebSocketCA()
	if err != nil {
		return nil, fmt.Errorf("the WebSocket's CA kept at join: %w", err)
	}
	return pem, nil
}
