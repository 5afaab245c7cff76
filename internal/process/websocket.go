package process

import (
	"crypto/tls"
	"fmt"
	"net"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/internal/config"
)

// Listening is where a process's listeners are, for Options.OnListen.
type Listening struct {
	// APIURL is the API's base URL; "" without the api role.
	APIURL string
	// Gateway is the gateway's address; "" without the gateway role.
	Gateway string
	// GatewayWebSocket is the URL of the gateway's WebSocket listener; "" without one.
	GatewayWebSocket string
}

// webSocketListener opens the gateway's WebSocket listener when gateway.websocket is enabled:
// its outer TLS from certFile and keyFile, else the gateway's own certificate own, unless plain.
func webSocketListener(c config.GatewayWebSocket, own tls.Certificate) (*gateway.WebSocket, error) {
	if !c.Enabled {
		return nil, nil
	}
	ws := &gateway.WebSocket{Path: c.Path}
	if !c.Plain {
		cert := own
		if c.CertFile != "" {
			var err error
			if cert, err = tls.LoadX509KeyPair(c.CertFile, c.KeyFile); err != nil {
				return nil, fmt.Errorf("gateway.websocket.certFile: %w", err)
			}
		}
		ws.TLS = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return nil, fmt.Errorf("gateway WebSocket listener: listen: %w", err)
	}
	ws.Listener = ln
	return ws, nil
}
