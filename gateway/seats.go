package gateway

import (
	"fmt"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/better-compute/better-compute/internal/apierr"
)

// seat reserves one of the gateway's session seats (Limits.Sessions) for node before its
// session does any work, and returns the function that gives it back. A node that already holds
// a session here may take a seat past the bound, since its new session ends the old one; any
// other node past it is refused with resource_exhausted, and its daemon retries later, here or
// at another gateway.
func (g *Gateway) seat(node uuid.UUID) (release func(), err error) {
	most := int64(g.opts.Limits.Sessions)
	if n := g.seats.Add(1); n > most && g.lookup(node) == nil {
		g.seats.Add(-1)
		return nil, &apierr.Error{Code: connect.CodeResourceExhausted, Msg: fmt.Sprintf(
			"limits.gatewaySessions: this gateway holds its most sessions (%d); connect again later", most)}
	}
	return func() { g.seats.Add(-1) }, nil
}
