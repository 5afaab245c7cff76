package devmode

import (
	"net"
	"net/url"
	"os"

	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/daemon"
)

// webSocketFor opens the gateway's WebSocket listener for simulated machines of transport t
// (websocket or auto) when the configuration does not already: on the host of the gateway's
// listener (loopback in dev), at a free port, with the gateway's own certificate as its outer
// TLS, which names that host and which the machines trust through the root CA they verify the
// gateway with.
func webSocketFor(gw *config.Gateway, t daemon.Transport) {
	ws := &gw.WebSocket
	if ws.Enabled || (t != daemon.TransportWebSocket && t != daemon.TransportAuto) {
		return
	}
	host, _, err := net.SplitHostPort(gw.Listen)
	if err != nil {
		host = "127.0.0.1"
	}
	ws.Enabled, ws.Listen, ws.Plain, ws.CertFile, ws.KeyFile = true, net.JoinHostPort(host, "0"), false, "", ""
}

// webSocketDialURL is where the simulated machines reach the WebSocket listener at rawURL: a
// listener on an unspecified address is this machine, by the name process gives the gateway's
// certificate (as dialAddr for the direct listener).
func webSocketDialURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL
	}
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsUnspecified() {
		return rawURL
	}
	name, err := os.Hostname()
	if err != nil {
		name = "127.0.0.1"
	}
	u.Host = net.JoinHostPort(name, u.Port())
	return u.String()
}
