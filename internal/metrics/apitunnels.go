package metrics

import (
	"strconv"
	"time"
)

// APITunnels records the tunnels an API process relays: bc_api_tunnels_open (open now),
// bc_api_tunnel_bytes_total{direction} (to_node, from_node), bc_api_tunnel_open_duration_seconds
// (from the WebSocket upgrade to the gateway's answer that the node's stream is there),
// bc_api_tunnels_closed_total{code} (by close code) and bc_api_tunnel_refusals_total{status}
// (upgrades refused before opening, by HTTP status). No label names a tenant, node or port. A
// nil *APITunnels records nothing.
type APITunnels struct {
	open             *Gauge
	toNode, fromNode *Counter
	openLatency      *Histogram
	closed, refusals *CounterVec
}

// Directions of bc_api_tunnel_bytes_total.
const (
	DirectionToNode   = "to_node"
	DirectionFromNode = "from_node"
)

// NewAPITunnels returns the tunnel instruments in r (the same ones on every call with r), or nil
// when r is nil.
func NewAPITunnels(r *Registry) *APITunnels {
	if r == nil {
		return nil
	}
	return set(r, "apitunnels", func() *APITunnels {
		bytes := r.Counter("bc_api_tunnel_bytes_total",
			"Bytes relayed by this API process's tunnels, by direction (to_node, from_node), counted as each tunnel closes.", "direction")
		return &APITunnels{
			open:   r.Gauge("bc_api_tunnels_open", "Tunnels this API process relays now.").With(),
			toNode: bytes.With(DirectionToNode), fromNode: bytes.With(DirectionFromNode),
			openLatency: r.Histogram("bc_api_tunnel_open_duration_seconds",
				"Time from a tunnel's WebSocket upgrade to the gateway's answer that the node's stream is there.", DurationBuckets).With(),
			closed: r.Counter("bc_api_tunnels_closed_total",
				"Tunnels this API process relayed that ended, by close code (1000 normal, 4000s: docs/tunnels.md).", "code"),
			refusals: r.Counter("bc_api_tunnel_refusals_total",
				"Tunnel upgrades refused before opening, by HTTP status.", "status"),
		}
	})
}

// Opened counts a tunnel that opened after d.
func (t *APITunnels) Opened(d time.Duration) {
	if t == nil {
		return
	}
	t.open.Inc()
	t.openLatency.ObserveDuration(d)
}

// Closed counts a tunnel counted by Opened that ended with code, having relayed toNode and
// fromNode bytes.
func (t *APITunnels) Closed(code int, toNode, fromNode int64) {
	if t == nil {
		return
	}
	t.open.Dec()
	t.toNode.Add(float64(toNode))
	t.fromNode.Add(float64(fromNode))
	t.closed.With(strconv.Itoa(code)).Inc()
}

// Failed counts a tunnel that was accepted but ended with code before it opened (the gateway
// refused it or could not be reached).
func (t *APITunnels) Failed(code int) {
	if t == nil {
		return
	}
	t.closed.With(strconv.Itoa(code)).Inc()
}

// Refused counts an upgrade refused with an HTTP status.
func (t *APITunnels) Refused(status int) {
	if t == nil {
		return
	}
	t.refusals.With(strconv.Itoa(status)).Inc()
}
