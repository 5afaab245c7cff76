package gateway

import (
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/limit"
)

// Limits bound what one caller may cost the gateway (config limits.*). A zero field takes its
// default from package limit, so a gateway is never unbounded.
type Limits struct {
	// RequestBytes bounds a Join, Renew or Secret request, after decompression
	// (limits.daemonRequestBytes). Join is open to callers without a certificate.
	RequestBytes int
	// HelloBytes, ResultBytes and EventBytes bound one session message of each kind
	// (limits.daemonHelloBytes, limits.daemonResultBytes, limits.daemonEventBytes); EventBytes
	// also bounds heartbeats and acks. The Welcome announces ResultBytes and EventBytes, so that
	// the daemon keeps within them (it reports a larger result as a failure and drops a larger
	// event); a node that sends a larger message anyway is told why and its session ends.
	HelloBytes, ResultBytes, EventBytes int
	// HeaderBytes bounds request headers (limits.headerBytes).
	HeaderBytes int
	// ReadHeaderTimeout bounds reading request headers (limits.readHeaderTimeout).
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes connections with no stream open this long (limits.idleTimeout).
	IdleTimeout time.Duration
	// Sessions bounds the sessions this gateway holds at once (limits.gatewaySessions): a node
	// past it is refused with resource_exhausted before anything is read or written for it,
	// unless it already holds a session here, which its new one supersedes.
	Sessions int

	// AnonymousConns and AnonymousConnsPerAddress bound the connections without a verified
	// client certificate (limits.gatewayAnonymousConns, limits.gatewayAnonymousConnsPerAddress):
	// one past either is closed as soon as its handshake shows it has none. Connections in their
	// handshake are bounded by ReadHeaderTimeout only, since a node's is one of them.
	AnonymousConns, AnonymousConnsPerAddress int
	// JoinsInFlight and JoinsInFlightPerAddress bound the requests being served on those
	// connections (limits.gatewayJoinsInFlight, limits.gatewayJoinsInFlightPerAddress); one past
	// either is refused with resource_exhausted before its body is read.
	JoinsInFlight, JoinsInFlightPerAddress int
	// JoinStreams is the most concurrent streams on a connection without a certificate
	// (limits.gatewayJoinStreams), and JoinWindowBytes its HTTP/2 receive window per stream and
	// per connection (limits.gatewayJoinWindowBytes); certificate-bearing connections keep the
	// tunnels' windows.
	JoinStreams, JoinWindowBytes int
	// JoinReadTimeout bounds the reading of a whole request on a connection without a
	// certificate (limits.gatewayJoinReadTimeout).
	JoinReadTimeout time.Duration
	// JoinRate and JoinBurst shape each client address's bucket of refused joins
	// (limits.gatewayJoinRate, limits.gatewayJoinBurst): a Join takes a token before anything is
	// looked up (an empty bucket refuses it with resource_exhausted), and gives it back when it
	// succeeds.
	JoinRate  float64
	JoinBurst int
}

// withDefaults fills the zero fields.
func (l Limits) withDefaults() Limits {
	l.RequestBytes = limit.Or(l.RequestBytes, limit.DefaultDaemonRequestBytes)
	l.HelloBytes = limit.Or(l.HelloBytes, limit.DefaultDaemonHelloBytes)
	l.ResultBytes = limit.Or(l.ResultBytes, limit.DefaultDaemonResultBytes)
	l.EventBytes = limit.Or(l.EventBytes, limit.DefaultDaemonEventBytes)
	l.HeaderBytes = limit.Or(l.HeaderBytes, limit.DefaultHeaderBytes)
	l.ReadHeaderTimeout = limit.Or(l.ReadHeaderTimeout, limit.DefaultReadHeaderTimeout)
	l.IdleTimeout = limit.Or(l.IdleTimeout, limit.DefaultIdleTimeout)
	l.Sessions = limit.Or(l.Sessions, limit.DefaultGatewaySessions)
	l.AnonymousConns = limit.Or(l.AnonymousConns, limit.DefaultGatewayAnonymousConns)
	l.AnonymousConnsPerAddress = limit.Or(l.AnonymousConnsPerAddress, limit.DefaultGatewayAnonymousConnsPerAddress)
	l.JoinsInFlight = limit.Or(l.JoinsInFlight, limit.DefaultGatewayJoinsInFlight)
	l.JoinsInFlightPerAddress = limit.Or(l.JoinsInFlightPerAddress, limit.DefaultGatewayJoinsInFlightPerAddress)
	l.JoinStreams = limit.Or(l.JoinStreams, limit.DefaultGatewayJoinStreams)
	l.JoinWindowBytes = limit.Or(l.JoinWindowBytes, limit.DefaultGatewayJoinWindowBytes)
	l.JoinReadTimeout = limit.Or(l.JoinReadTimeout, limit.DefaultGatewayJoinReadTimeout)
	l.JoinRate = limit.Or(l.JoinRate, limit.DefaultGatewayJoinRate)
	l.JoinBurst = limit.Or(l.JoinBurst, limit.DefaultGatewayJoinBurst)
	return l
}

// sessionMessageBytes is the most a session message may take, whatever its kind: Connect refuses
// anything larger while reading it; checkMessage then holds each kind to its own limit. The
// oneof's tag and length add a few bytes to the largest kind.
func (l Limits) sessionMessageBytes() int {
	return max(l.HelloBytes, l.ResultBytes, l.EventBytes) + 16
}

// checkMessage says why a session message is over its kind's limit, as a ResourceExhausted
// error whose message the daemon logs; nil when it is within it.
func (l Limits) checkMessage(msg *daemonv1.SessionRequest) error {
	var kind, key string
	var lim int
	var size int
	switch m := msg.GetMsg().(type) {
	case *daemonv1.SessionRequest_Hello:
		kind, key, lim, size = "hello", "limits.daemonHelloBytes", l.HelloBytes, proto.Size(m.Hello)
	case *daemonv1.SessionRequest_Result:
		kind, key, lim, size = "command result", "limits.daemonResultBytes", l.ResultBytes, proto.Size(m.Result)
	case *daemonv1.SessionRequest_Event:
		kind, key, lim, size = "event", "limits.daemonEventBytes", l.EventBytes, proto.Size(m.Event)
	default: // heartbeats, acks and kinds this gateway does not know
		kind, key, lim, size = "message", "limits.daemonEventBytes", l.EventBytes, proto.Size(msg)
	}
	if size <= lim {
		return nil
	}
	return tooLarge(fmt.Sprintf("%s of %d bytes", kind, size), lim, key)
}

// tooLarge is the error for a message over a limit, naming the limit's configuration key.
func tooLarge(what string, lim int, key string) error {
	return connect.NewError(connect.CodeResourceExhausted,
		fmt.Errorf("%s is larger than the gateway's limit of %d bytes (%s)", what, lim, key))
}

// overReadLimit turns Connect's refusal of a message larger than the stream's read limit into the
// gateway's own error; nil for other errors.
func (l Limits) overReadLimit(err error) error {
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		return nil
	}
	return tooLarge("a session message", l.sessionMessageBytes(), "limits.daemonHelloBytes, daemonResultBytes and daemonEventBytes")
}

// reasonOf is the message of a Connect error without its code, for a goodbye.
func reasonOf(err error) string {
	var cerr *connect.Error
	if errors.As(err, &cerr) {
		return cerr.Message()
	}
	return err.Error()
}
