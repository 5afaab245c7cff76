package fleet

// Transport is how a node's session reaches its gateway, as node_sessions.transport stores it
// and nodes/get shows it.
type Transport string

// Transports.
const (
	// TransportH2 is HTTP/2 over mutual TLS on the gateway's listener, directly or through an
	// L4 load balancer that passes TLS through.
	TransportH2 Transport = "h2"
	// TransportWebSocket is the same TLS session (node certificate, ALPN h2) carried inside a
	// WebSocket on the gateway's WebSocket listener, through HTTP proxies, TLS-inspecting
	// middleboxes or a load balancer that terminates the outer TLS.
	TransportWebSocket Transport = "websocket"
)
