package doctor

import (
	"context"
	"fmt"
	"strings"

	"github.com/better-compute/better-compute/gen/db"
)

// maxTransportGateways bounds the gateways the session transports finding names one by one.
const maxTransportGateways = 10

// sessionTransports reports how the nodes' sessions reach their gateways: directly (h2) or over
// WebSocket (through proxies, bcd run --transport websocket|auto), in all and per gateway. It is
// informative: either transport is healthy, but many WebSocket sessions of a gateway point at a
// network in front of its nodes that blocks the direct path.
func sessionTransports(ctx context.Context, q *db.Queries) Finding {
	gws, err := q.SessionTransports(ctx)
	if err != nil {
		return Finding{Severity: Error, Cause: fmt.Sprintf("sessions by transport: %v", err)}
	}
	var h2, ws int64
	per := make([]string, 0, min(len(gws), maxTransportGateways))
	for i, g := range gws {
		h2, ws = h2+g.H2, ws+g.Websocket
		if i < maxTransportGateways {
			per = append(per, fmt.Sprintf("%s %d h2, %d websocket", g.GatewayID, g.H2, g.Websocket))
		}
	}
	cause := fmt.Sprintf("%d sessions: %d direct (h2), %d over WebSocket", h2+ws, h2, ws)
	if len(per) > 0 {
		cause += "; by gateway: " + strings.Join(per, "; ")
		if more := len(gws) - len(per); more > 0 {
			cause += fmt.Sprintf(" (and %d more gateways)", more)
		}
	}
	return Finding{Severity: OK, Cause: cause}
}
