// Package tunnel is the wire of Better Compute's tunnels — byte streams between a client (the
// CLI, an SDK) and a TCP port on a node's loopback — as every hop speaks it: the frame format
// (frame.go), the close codes and the API's refusals (codes.go), a frame stream over a WebSocket
// (the client's hop) or over any reader and writer (ByteStream), and Pump, which joins a TCP
// connection to a frame stream at the ends. The Go SDK (Client.Tunnel) and the control plane
// share it; docs/tunnels.md in the repository describes the protocol for other languages.
package tunnel

// Subprotocol is the WebSocket subprotocol a client must offer.
const Subprotocol = "bettercompute.tunnel.v1"
