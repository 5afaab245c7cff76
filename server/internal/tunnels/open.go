package tunnels

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/coder/websocket"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/client/tunnel"
	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/guard"
	"github.com/better-compute/better-compute/internal/requestid"
	"github.com/better-compute/better-compute/internal/scrub"
	"github.com/better-compute/better-compute/internal/tunnelhop"
)

// maxTicketLen bounds the ticket in the path; a ticket is 43 characters.
const maxTicketLen = 64

// relayLease is how long an open tunnel's row counts as relayed without its API renewing it
// (the watcher renews every renewEvery).
const relayLease = 30 * time.Second

// recordTimeout bounds the statements that record a tunnel's end and audit rows.
const recordTimeout = 5 * time.Second

// Audit methods of the rows at a tunnel's ends, beside tunnels/create and tunnels/close.
const (
	auditOpen   = "tunnels/open"
	auditClosed = "tunnels/closed"
)

// spent is a ticket spent by an upgrade: its tunnel and the gateway to stream it to.
type spent struct {
	row        db.Tunnel
	controlURL string
}

// refusal is an upgrade refused before the WebSocket opens: a documented refusal, with detail.
type refusal struct {
	tunnel.Refusal
	detail string
}

func refuse(r tunnel.Refusal, format string, args ...any) *refusal {
	return &refusal{Refusal: r, detail: fmt.Sprintf(format, args...)}
}

// ServeHTTP serves GET {basePath}/tunnels/{ticket}: it refuses with an HTTP status and opens
// nothing (tunnel.Refusals), or upgrades to a WebSocket of the tunnel subprotocol and relays the
// tunnel until it ends, with a close code (tunnel.Codes).
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	p, err := s.guard.AuthenticateHTTP(ctx, r, PermissionOpen)
	if err != nil {
		s.refuseAuth(w, r, p, err)
		return
	}
	if p == nil {
		s.writeRefusal(w, r, nil, refuse(tunnel.RefuseUnauthenticated, `send "Authorization: Bearer <API key>"`))
		return
	}
	if !upgradeRequested(r) {
		w.Header().Set("Upgrade", "websocket")
		w.Header().Set("Connection", "Upgrade")
		s.writeRefusal(w, r, p, refuse(tunnel.RefuseNotWebSocket, "an HTTP/1.1 GET with Upgrade: websocket and Sec-WebSocket-Protocol: %s", tunnel.Subprotocol))
		return
	}
	sp, l, ref, err := s.spend(ctx, p, r.PathValue("ticket"))
	if err != nil {
		s.log.ErrorContext(ctx, "open a tunnel", "request_id", requestid.From(ctx), "err", err)
		s.writeRefusal(w, r, p, refuse(tunnel.Refusal{Status: http.StatusInternalServerError, Reason: "internal error"}, "request id %s", requestid.From(ctx)))
		return
	}
	if ref != nil {
		s.writeRefusal(w, r, p, ref)
		return
	}
	s.relay(w, r, p, sp, l)
}

// upgradeRequested reports whether r asks for a WebSocket of the tunnel subprotocol over
// HTTP/1.1, so a request the upgrade would fail is refused before its ticket is spent.
func upgradeRequested(r *http.Request) bool {
	if r.ProtoMajor != 1 || r.ProtoMinor < 1 || !headerHas(r.Header, "Connection", "upgrade") ||
		!headerHas(r.Header, "Upgrade", "websocket") || r.Header.Get("Sec-WebSocket-Key") == "" {
		return false
	}
	return headerHas(r.Header, "Sec-WebSocket-Protocol", tunnel.Subprotocol)
}

// headerHas reports whether a comma-separated header lists token (case-insensitively).
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// spend spends the ticket and checks what opening its tunnel depends on, in one transaction
// that commits only when the tunnel may open: a refused ticket stays unspent. The tunnel is
// registered as relayed by this process.
func (s *Service) spend(ctx context.Context, p *auth.Principal, ticket string) (*spent, *liveTunnel, *refusal, error) {
	if ticket == "" || len(ticket) > maxTicketLen {
		return nil, nil, refuse(tunnel.RefuseUnknownTicket, "not a ticket"), nil
	}
	hash := tunnelhop.HashTicket(ticket)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	q := db.New(tx)
	row, err := q.SpendTunnelTicket(ctx, db.SpendTunnelTicketParams{
		TenantID: p.TenantID, TicketHash: hash, ApiInstance: s.opts.Instance, LeaseMs: relayLease.Milliseconds(),
	})
	if errors.Is(err, pgx.ErrNoRows) {
		ref, err := whyNotSpent(ctx, q, p.TenantID, hash)
		return nil, nil, ref, err
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("spend a tunnel ticket: %w", err)
	}
	if err := q.LockTunnelCaps(ctx, db.LockTunnelCapsParams{TenantID: p.TenantID, NodeID: row.NodeID}); err != nil {
		return nil, nil, nil, fmt.Errorf("lock the tunnel caps: %w", err)
	}
	chk, err := q.CheckTunnelOpen(ctx, db.CheckTunnelOpenParams{TenantID: p.TenantID, ID: row.ID})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("check tunnel %s: %w", row.ID, err)
	}
	switch {
	case !chk.Allowed:
		return nil, nil, refuse(tunnel.RefuseNotAllowed, "port %d of node %s", row.Port, row.NodeID), nil
	case chk.OpenOnNode > int64(s.opts.PerNode):
		return nil, nil, refuse(tunnel.RefuseTooMany, "node %s has %d open tunnels (tunnels.perNode)", row.NodeID, s.opts.PerNode), nil
	case chk.OpenOfTenant > int64(s.opts.PerTenant):
		return nil, nil, refuse(tunnel.RefuseTooMany, "the tenant has %d open tunnels (tunnels.perTenant)", s.opts.PerTenant), nil
	case chk.ControlUrl == "":
		return nil, nil, refuse(tunnel.RefuseNodeOffline, "node %s", row.NodeID), nil
	case s.opts.Dialer == nil:
		return nil, nil, refuse(tunnel.RefuseNodeOffline, "this API cannot reach gateways: the machine PKI is not initialised"), nil
	}
	l, ok := s.register(row.ID)
	if !ok {
		return nil, nil, refuse(tunnel.Refusal{Status: http.StatusServiceUnavailable, Reason: "the API is shutting down"}, "retry"), nil
	}
	if err := tx.Commit(ctx); err != nil {
		s.unregister(l)
		return nil, nil, nil, fmt.Errorf("spend a tunnel ticket: commit: %w", err)
	}
	return &spent{row: row, controlURL: chk.ControlUrl}, l, nil, nil
}

// whyNotSpent tells why a ticket could not be spent: unknown, another tenant's, spent, or expired
// (or closed unused).
func whyNotSpent(ctx context.Context, q *db.Queries, tenant uuid.UUID, hash []byte) (*refusal, error) {
	t, err := q.GetTunnelTicket(ctx, hash)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return refuse(tunnel.RefuseUnknownTicket, "it may have been pruned"), nil
	case err != nil:
		return nil, fmt.Errorf("read a tunnel ticket: %w", err)
	case t.TenantID != tenant:
		return refuse(tunnel.RefuseOtherTenant, "open it with an API key of the tenant that created it"), nil
	case t.Opened:
		return refuse(tunnel.RefuseSpentTicket, "a ticket opens one tunnel: create another"), nil
	case t.Closed:
		return refuse(tunnel.RefuseExpiredTicket, "it was closed (tunnels/close)"), nil
	case t.Expired:
		return refuse(tunnel.RefuseExpiredTicket, "a ticket is valid for %v", tunnelhop.TicketTTL), nil
	}
	// Spent by a concurrent upgrade between the two statements.
	return refuse(tunnel.RefuseSpentTicket, "a ticket opens one tunnel: create another"), nil
}

// refuseAuth answers an upgrade whose credential the guard refused, as the guard answers calls.
func (s *Service) refuseAuth(w http.ResponseWriter, r *http.Request, p *auth.Principal, err error) {
	cerr, internal := apierr.ToConnect(err, requestid.From(r.Context()))
	if internal {
		s.log.ErrorContext(r.Context(), "authenticate a tunnel upgrade", "request_id", requestid.From(r.Context()), "err", err)
	}
	status := http.StatusInternalServerError
	switch cerr.Code() {
	case connect.CodeUnauthenticated:
		status = http.StatusUnauthorized
	case connect.CodePermissionDenied:
		status = http.StatusForbidden
	case connect.CodeResourceExhausted:
		status = http.StatusTooManyRequests
		if v := cerr.Meta().Get(guard.RetryAfterHeader); v != "" {
			w.Header().Set(guard.RetryAfterHeader, v)
		}
	}
	s.writeRefusal(w, r, p, refuse(tunnel.Refusal{Status: status, Reason: http.StatusText(status)}, "%s", cerr.Message()))
}

// writeRefusal answers a refused upgrade: the status, and the reason and detail as text. A
// refusal of an authenticated principal leaves an audit row, as a refused call of an audited
// method does.
func (s *Service) writeRefusal(w http.ResponseWriter, r *http.Request, p *auth.Principal, ref *refusal) {
	s.metrics.Refused(ref.Status)
	msg := ref.Reason
	if ref.detail != "" {
		msg += ": " + ref.detail
	}
	if p != nil {
		s.audit(r.Context(), p, auditOpen, uuid.Nil, outcomeOf(ref.Status))
	}
	level := slog.LevelInfo
	if p == nil {
		level = slog.LevelDebug // anyone can send these, as fast as they like (they are counted)
	}
	s.log.Log(r.Context(), level, "tunnel upgrade refused", logArgs(r, p, "status", ref.Status, "reason", msg)...)
	w.Header().Set("Cache-Control", "no-store")
	http.Error(w, msg, ref.Status)
}

// outcomeOf is the audit outcome of a refusal: the Connect code of the like error of a call.
func outcomeOf(status int) string {
	code := connect.CodeInternal
	switch status {
	case http.StatusUnauthorized:
		code = connect.CodeUnauthenticated
	case http.StatusForbidden:
		code = connect.CodePermissionDenied
	case http.StatusNotFound:
		code = connect.CodeNotFound
	case http.StatusConflict, http.StatusGone, http.StatusPreconditionFailed:
		code = connect.CodeFailedPrecondition
	case http.StatusUpgradeRequired:
		code = connect.CodeInvalidArgument
	case http.StatusTooManyRequests:
		code = connect.CodeResourceExhausted
	case http.StatusServiceUnavailable:
		code = connect.CodeUnavailable
	}
	return code.String()
}

// audit writes an audit row of a tunnel's end (or of a refused upgrade, without a tunnel); a
// failure is logged, not returned: the tunnel's fate is decided already.
func (s *Service) audit(ctx context.Context, p *auth.Principal, method string, id uuid.UUID, outcome string) {
	target := ""
	if id != uuid.Nil {
		target = "tunnel/" + id.String()
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := db.New(s.pool).InsertAuditEvent(actx, db.InsertAuditEventParams{
		TenantID: &p.TenantID, PrincipalID: &p.ID, Method: method, Target: target, Outcome: outcome,
		RequestID: requestid.From(ctx),
	}); err != nil {
		s.log.ErrorContext(ctx, "write a tunnel's audit row", "request_id", requestid.From(ctx), "method", method, "err", err)
	}
}

// relay upgrades a spent ticket's request to the client's WebSocket, streams the tunnel to the
// gateway, relays until it ends and records how.
func (s *Service) relay(w http.ResponseWriter, r *http.Request, p *auth.Principal, sp *spent, l *liveTunnel) {
	start := time.Now()
	ctx := r.Context()
	row := sp.row
	// The server's timeouts bound requests; a tunnel lasts as long as it is used. (Hijacking
	// clears the connection's deadlines too, but the documentation does not promise it.)
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols: []string{tunnel.Subprotocol},
		// The key in the Authorization header is the only credential; a browser page on another
		// origin cannot send it, so the origin check would add nothing.
		InsecureSkipVerify: true,
		CompressionMode:    websocket.CompressionDisabled,
	})
	if err != nil {
		s.finish(ctx, p, l, row, tunnel.CodeInternal, "the WebSocket upgrade failed: "+err.Error(), nil)
		return
	}
	s.audit(ctx, p, auditOpen, row.ID, "ok")
	// The request's context ends with the handler; the tunnel's with its streams.
	base := context.WithoutCancel(ctx)
	wsCtx, cancelWS := context.WithCancel(base)
	gwCtx, cancelGW := context.WithCancel(base)
	defer cancelWS()
	defer cancelGW()
	client := &clientStream{WebSocketStream: tunnel.NewWebSocketStream(wsCtx, conn), conn: conn, ctx: wsCtx, onAbort: l.armGrace}
	l.start(cancelWS, cancelGW)
	gw, err := s.opts.Dialer.Dial(gwCtx, sp.controlURL, row.ID.String(), row.NodeID.String(), int(row.Port))
	if err != nil {
		code, reason := tunnel.CodeNodeOffline, "the gateway holding the node's session cannot be reached"
		var de *tunnelhop.DialError
		if errors.As(err, &de) {
			code, reason = de.Code(), de.Reason
		}
		if c, why, ok := l.aborted(); ok {
			code, reason = c, why
		}
		s.log.InfoContext(ctx, "tunnel not opened", logArgs(r, p, "tunnel_id", row.ID, "code", int(code), "err", err)...)
		_ = client.WriteFrame(tunnel.Frame{Type: tunnel.Abort, Payload: tunnel.AbortPayload(code, reason)})
		_ = client.CloseWith(code, reason)
		s.finish(ctx, p, l, row, code, reason, nil)
		return
	}
	s.metrics.Opened(time.Since(start))
	relay := tunnelhop.NewRelay(client, &gatewayStream{Stream: gw, onAbort: l.armGrace}, tunnel.CodeReset, tunnel.CodeGatewayLost)
	l.relaying(relay)
	s.log.InfoContext(ctx, "tunnel opened", logArgs(r, p, "tunnel_id", row.ID, "node_id", row.NodeID, "port", row.Port,
		"open_latency", time.Since(start))...)
	go s.keepAlive(conn, relay, l)
	code, reason := relay.Run()
	s.finish(ctx, p, l, row, code, reason, relay)
	s.log.InfoContext(ctx, "tunnel closed", logArgs(r, p, "tunnel_id", row.ID, "code", int(code), "reason", reason,
		"bytes_to_node", relay.AToB.Load(), "bytes_from_node", relay.BToA.Load(), "duration", time.Since(start))...)
}

// keepAlive pings the client every tunnelhop.PingInterval and ends the tunnel when a pong does not
// come within the next interval (tunnel.CodeReset), or when nothing went either way for the idle
// timeout (tunnel.CodeIdle).
func (s *Service) keepAlive(conn *websocket.Conn, relay *tunnelhop.Relay, l *liveTunnel) {
	idle := s.opts.IdleTimeout
	timer := time.NewTimer(idle)
	defer timer.Stop()
	pings := time.NewTicker(tunnelhop.PingInterval)
	defer pings.Stop()
	for {
		select {
		case <-relay.Done():
			return
		case <-timer.C:
			if d := relay.Idle(); d < idle {
				timer.Reset(idle - d)
				continue
			}
			l.abort(tunnel.CodeIdle, fmt.Sprintf("nothing either way for %v", idle))
			return
		case <-pings.C:
			ctx, cancel := context.WithTimeout(context.Background(), tunnelhop.PingInterval)
			err := conn.Ping(ctx)
			cancel()
			if err != nil {
				select {
				case <-relay.Done():
				default:
					l.abort(tunnel.CodeReset, "the client did not answer a ping")
				}
				return
			}
		}
	}
}

// finish records how a tunnel ended (its row and audit row, the metrics) and forgets it; relay
// is nil when it never opened.
func (s *Service) finish(ctx context.Context, p *auth.Principal, l *liveTunnel, row db.Tunnel, code tunnel.Code, reason string, relay *tunnelhop.Relay) {
	defer s.unregister(l)
	var toNode, fromNode int64
	if relay != nil {
		toNode, fromNode = relay.AToB.Load(), relay.BToA.Load()
		s.metrics.Closed(int(code), toNode, fromNode)
	} else {
		s.metrics.Failed(int(code))
	}
	c := int32(code)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if err := db.New(s.pool).RecordTunnelClosed(rctx, db.RecordTunnelClosedParams{
		TenantID: row.TenantID, ID: row.ID, CloseCode: &c, CloseReason: scrub.Truncate(reason, 200),
		BytesToNode: toNode, BytesFromNode: fromNode,
	}); err != nil {
		s.log.ErrorContext(ctx, "record a tunnel's end", "request_id", requestid.From(ctx), "tunnel_id", row.ID, "err", err)
	}
	s.audit(ctx, p, auditClosed, row.ID, strconv.Itoa(int(code)))
}

// logArgs are a tunnel's log attributes: the request id and who, then kv.
func logArgs(r *http.Request, p *auth.Principal, kv ...any) []any {
	args := []any{"request_id", requestid.From(r.Context())}
	if p != nil {
		args = append(args, "principal_id", p.ID, "tenant_id", p.TenantID)
	}
	return append(args, kv...)
}

// clientStream is the client's WebSocket as the relay's stream. Once the client half-closed it
// reads no more messages, but control frames are still read (CloseRead), so pings are answered
// and the close handshake completes while the node's side keeps sending; a message after the
// client's CloseWrite breaks the connection (a protocol violation).
type clientStream struct {
	*tunnel.WebSocketStream
	conn    *websocket.Conn
	ctx     context.Context
	onAbort func()
}

// ReadFrame reads the client's next frame.
func (c *clientStream) ReadFrame() (tunnel.Frame, error) {
	f, err := c.WebSocketStream.ReadFrame()
	if err == nil && f.Type == tunnel.CloseWrite {
		c.conn.CloseRead(c.ctx)
	}
	return f, err
}

// WriteFrame sends a frame to the client; an Abort frame starts the grace after which a client
// that does not read is cut off.
func (c *clientStream) WriteFrame(f tunnel.Frame) error {
	if f.Type == tunnel.Abort {
		c.onAbort()
	}
	return c.WebSocketStream.WriteFrame(f)
}

// gatewayStream is the gateway's stream as the relay's; an Abort frame written to it starts the
// grace after which a gateway that does not read is cut off.
type gatewayStream struct {
	tunnel.Stream
	onAbort func()
}

func (g *gatewayStream) WriteFrame(f tunnel.Frame) error {
	if f.Type == tunnel.Abort {
		g.onAbort()
	}
	return g.Stream.WriteFrame(f)
}
