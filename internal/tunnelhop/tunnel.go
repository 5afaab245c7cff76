// Package tunnelhop is the control plane's side of tunnels: the hops inside it, between the API,
// the gateway that holds the node's session and the node's daemon. The wire every hop shares —
// frames, close codes, the WebSocket stream, Pump — is package
// github.com/better-compute/better-compute/client/tunnel, which the Go SDK uses too.
//
// A tunnel has four hops, each carrying the same frames:
//
//	client ──WebSocket──▶ API ──HTTP/2 stream (mTLS, internal CA)──▶ gateway ◀──HTTP/2 stream (node certificate)── bcd ──TCP──▶ 127.0.0.1:port
//
// The client opens GET {basePath}/tunnels/{ticket} with its API key and the subprotocol
// tunnel.Subprotocol; the ticket comes from tunnels/create and is spent by the upgrade. The API
// streams to the gateway (ControlPath, naming the tunnel with a
// bettercompute.gateway.v1.OpenTunnelRequest in HeaderOpen); the gateway asks the daemon over its
// session to open the tunnel (bettercompute.daemon.v1.TunnelOpen), and the daemon dials the port
// and opens its own stream to the gateway (DataPlanePath) on a connection of its own, so bulk
// data never waits behind heartbeats or commands. Each hop relays frames without interpreting
// them (Relay), but for the endpoints: a CloseWrite frame is a half-close (the other direction
// keeps flowing), an Error frame or a torn stream is an abort. Backpressure is each hop's flow
// control (TCP under the WebSocket, HTTP/2 stream windows), and each hop holds at most one frame
// per direction, so a slow reader never grows memory beyond the windows (Windows).
//
// This package holds the hops' routes, limits and windows, tickets, the API's dialer to the
// gateway (Dialer) and the relay between two streams.
package tunnelhop

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"time"
)

// Paths of the internal hops.
const (
	// ControlPath is the gateway's control API route the API streams a tunnel to (POST, mTLS
	// from the internal CA), with the tunnel to open in the header HeaderOpen. It is a raw
	// HTTP/2 stream of frames, not an RPC, beside the control API's Connect service
	// (proto/bettercompute/gateway/v1/control.proto documents both).
	ControlPath = "/bettercompute.gateway.v1/tunnel"
	// DataPlanePath is the gateway route a daemon streams an opened tunnel on (POST
	// DataPlanePath + tunnel id, with its node certificate).
	DataPlanePath = "/bettercompute.tunnel.v1/node/"
)

// Lifetimes and limits.
const (
	// TicketTTL is how long a ticket may wait to be spent.
	TicketTTL = 30 * time.Second
	// DefaultIdleTimeout closes a tunnel that carried no data either way for this long.
	DefaultIdleTimeout = time.Hour
	// OpenTimeout bounds the wait for a daemon to answer a TunnelOpen with its stream.
	OpenTimeout = 10 * time.Second
	// PingInterval is how often the API pings a tunnel's WebSocket.
	PingInterval = 30 * time.Second
	// DefaultPerNode and DefaultPerTenant cap open tunnels.
	DefaultPerNode   = 256
	DefaultPerTenant = 1024
)

// Windows are the HTTP/2 flow-control windows of the tunnel hops, chosen for throughput at
// real round trips while bounding memory. A stream carries at most StreamWindow bytes in flight
// per direction, so one tunnel's throughput is at most StreamWindow / RTT: 4 MiB at 50 ms is
// 80 MiB/s (671 Mbit/s), at 1 ms on loopback it is not the bound. A receiver buffers at most
// that window per stream, so a gateway holds at most 2 × StreamWindow per open tunnel (one
// per hop) in the worst case of readers that stopped reading; ConnWindow bounds a connection's
// tunnels together.
const (
	StreamWindow = 4 << 20
	ConnWindow   = 64 << 20
	// MaxFrameSize is the largest HTTP/2 frame the tunnel hops read: one tunnel frame fits.
	// Go's HTTP/2 peers size a 512 KiB-per-stream write buffer from the default (1 MiB);
	// advertising this instead saves nearly a megabyte per open tunnel.
	MaxFrameSize = 80 << 10
)

// NewTicket returns a new ticket, as the client presents it, and its hash, as it is stored: 32
// random bytes, URL-safe base64 without padding.
func NewTicket() (ticket string, hash []byte) {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	ticket = base64.RawURLEncoding.EncodeToString(b)
	return ticket, HashTicket(ticket)
}

// HashTicket is the stored form of a ticket.
func HashTicket(ticket string) []byte {
	h := sha256.Sum256([]byte(ticket))
	return h[:]
}
