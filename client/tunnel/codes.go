package tunnel

import "net/http"

// Code is why a tunnel ended: a WebSocket close code, and the code of an Abort frame on the
// internal hops. 1000 is a normal end (both sides closed); the 4000s are this protocol's.
type Code uint16

// The close codes a client sees once the WebSocket is open.
const (
	CodeNormal        Code = 1000 // both directions closed
	CodeGoingAway     Code = 1001 // the API is shutting down
	CodeInternal      Code = 1011 // a fault in the control plane
	CodeIdle          Code = 4000 // nothing either way for the idle timeout
	CodeLeaseEnded    Code = 4001 // the lease that allowed the tunnel ended
	CodeNodeGone      Code = 4002 // the node was revoked, retired, or drained of the tenant
	CodePortRefused   Code = 4003 // the node's daemon does not allow the port (its local allow list)
	CodeNodeOffline   Code = 4004 // the node has no session, or its daemon did not answer in time
	CodeDialFailed    Code = 4005 // the daemon could not connect to the port (nothing listens)
	CodeGatewayLost   Code = 4006 // the gateway or the daemon's stream went away mid-tunnel
	CodeProtocol      Code = 4007 // a malformed frame
	CodeTunnelsClosed Code = 4008 // the tunnel was closed by an operator (tunnels/close)
	CodeReset         Code = 4009 // the connection at one end (the client's, or the port's on the node) was reset
)

// Describe says what a code means, for logs, audit and the documentation.
func (c Code) Describe() string {
	switch c {
	case CodeNormal:
		return "closed by both sides"
	case CodeGoingAway:
		return "the API is shutting down"
	case CodeInternal:
		return "internal error"
	case CodeIdle:
		return "idle for too long"
	case CodeLeaseEnded:
		return "the lease that allowed the tunnel ended"
	case CodeNodeGone:
		return "the node was revoked, retired or drained"
	case CodePortRefused:
		return "the node's daemon does not allow the port"
	case CodeNodeOffline:
		return "the node is offline or did not answer"
	case CodeDialFailed:
		return "nothing listens on the port on the node"
	case CodeGatewayLost:
		return "the gateway or the node's stream went away"
	case CodeProtocol:
		return "protocol error"
	case CodeTunnelsClosed:
		return "closed by an operator"
	case CodeReset:
		return "a connection at one end was reset"
	}
	return "unknown"
}

// Codes lists every close code, for the documentation.
var Codes = []Code{CodeNormal, CodeGoingAway, CodeInternal, CodeIdle, CodeLeaseEnded, CodeNodeGone,
	CodePortRefused, CodeNodeOffline, CodeDialFailed, CodeGatewayLost, CodeProtocol, CodeTunnelsClosed, CodeReset}

// Refusal is why GET {basePath}/tunnels/{ticket} is refused before the upgrade: an HTTP status,
// and nothing is opened.
type Refusal struct {
	Status int
	Reason string
}

// The refusals before the upgrade.
var (
	RefuseUnauthenticated = Refusal{http.StatusUnauthorized, "an API key is required"}
	RefuseUnknownTicket   = Refusal{http.StatusNotFound, "no such ticket"}
	RefuseOtherTenant     = Refusal{http.StatusForbidden, "the ticket is another tenant's"}
	RefuseSpentTicket     = Refusal{http.StatusConflict, "the ticket was used already"}
	RefuseExpiredTicket   = Refusal{http.StatusGone, "the ticket expired"}
	RefuseNotWebSocket    = Refusal{http.StatusUpgradeRequired, "a WebSocket upgrade with subprotocol " + Subprotocol + " is required"}
	RefuseTooMany         = Refusal{http.StatusTooManyRequests, "too many open tunnels for the node or the tenant"}
	RefuseNodeOffline     = Refusal{http.StatusServiceUnavailable, "the node has no session with a gateway"}
	RefuseNotAllowed      = Refusal{http.StatusPreconditionFailed, "the tunnel is no longer allowed (lease ended, node gone)"}
)

// Refusals lists them, for the documentation.
var Refusals = []Refusal{RefuseUnauthenticated, RefuseUnknownTicket, RefuseOtherTenant, RefuseSpentTicket,
	RefuseExpiredTicket, RefuseNotWebSocket, RefuseTooMany, RefuseNodeOffline, RefuseNotAllowed}
