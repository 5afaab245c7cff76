// Package tunnels implements bettercompute.tunnels.v1.TunnelsService and the tunnel endpoint
// GET {basePath}/tunnels/{ticket}: the API's hop of a tunnel (package tunnel draws the path).
//
// tunnels/create checks that the caller may reach the port and stores a single-use ticket,
// hashed, for tunnelhop.TicketTTL. The upgrade authenticates the API key as the guard does, spends
// the ticket with one conditional update (a ticket that cannot be spent is refused before the
// upgrade with a status that says why), checks again that the tunnel is allowed, the caps on
// open tunnels and that the node has a session, then accepts the WebSocket, streams to the
// gateway holding the node's session (tunnelhop.Dialer) and relays between the two (tunnelhop.Relay).
// While this process relays tunnels, one watcher ends those whose lease ended, whose node went,
// or that tunnels/close asked to close (watch.go). The tunnel's row records when it opened and
// closed, why, and the bytes each way; audit rows mark both ends.
package tunnels

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/client/tunnel"
	"github.com/better-compute/better-compute/gen/db"
	tunnelsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/tunnels/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/tunnels/v1/tunnelsv1connect"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/metrics"
	"github.com/better-compute/better-compute/internal/page"
	"github.com/better-compute/better-compute/internal/scrub"
	"github.com/better-compute/better-compute/internal/tunnelhop"
)

// PermissionOpen is what the principal whose key opens a ticket must hold: the permission of
// tunnels/create.
const PermissionOpen = "tunnels.create"

// Dialer streams a tunnel to the gateway at controlURL (*tunnelhop.Dialer).
type Dialer interface {
	Dial(ctx context.Context, controlURL, id, node string, port int) (*tunnel.ByteStream, error)
}

// Authenticator authenticates the upgrade's API key as the guard does for calls, with its rate
// limits (*guard.Guard): (nil, nil) without a credential.
type Authenticator interface {
	AuthenticateHTTP(ctx context.Context, r *http.Request, permission string) (*auth.Principal, error)
}

// Options configure the service.
type Options struct {
	// Dialer reaches the gateways' control APIs; without one (no machine PKI) every upgrade is
	// refused with 503.
	Dialer Dialer
	// Instance names this API process in the rows of the tunnels it relays; a random name when
	// empty.
	Instance string
	// IdleTimeout ends a tunnel that carried nothing either way for this long;
	// tunnelhop.DefaultIdleTimeout when zero.
	IdleTimeout time.Duration
	// PerNode and PerTenant cap open tunnels (of any tenant on one node, of one tenant);
	// tunnelhop.DefaultPerNode and tunnelhop.DefaultPerTenant when zero.
	PerNode, PerTenant int
	// BaseURL is the public URL clients reach the API at (config baseURL); when empty, a ticket's
	// URL is made from the host and scheme of the tunnels/create request.
	BaseURL string
	// BasePath is where the API is mounted.
	BasePath string
	Logger   *slog.Logger
	// Metrics receives the tunnel instruments (metrics.APITunnels); none when nil.
	Metrics *metrics.Registry
}

// Service answers TunnelsService calls and serves the tunnel endpoint.
type Service struct {
	pool    *pgxpool.Pool
	admit   *admission.Admitter
	guard   Authenticator
	opts    Options
	log     *slog.Logger
	metrics *metrics.APITunnels

	mu       sync.Mutex
	live     map[uuid.UUID]*liveTunnel // the tunnels this process relays, by id
	watching bool                      // the watcher runs
	closing  bool                      // CloseAll was called: no more tunnels open here
	relays   sync.WaitGroup            // upgrade handlers past the spend
}

var _ tunnelsv1connect.TunnelsServiceHandler = (*Service)(nil)

// New returns the service.
func New(pool *pgxpool.Pool, admit *admission.Admitter, guard Authenticator, opts Options) *Service {
	if opts.Instance == "" {
		opts.Instance = "api-" + uuid.NewString()
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = tunnelhop.DefaultIdleTimeout
	}
	if opts.PerNode <= 0 {
		opts.PerNode = tunnelhop.DefaultPerNode
	}
	if opts.PerTenant <= 0 {
		opts.PerTenant = tunnelhop.DefaultPerTenant
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Service{
		pool: pool, admit: admit, guard: guard, opts: opts, log: log,
		metrics: metrics.NewAPITunnels(opts.Metrics), live: map[uuid.UUID]*liveTunnel{},
	}
}

// Create checks that the caller may reach the port and returns a new ticket with its URL.
func (s *Service) Create(ctx context.Context, req *tunnelsv1.CreateRequest) (*tunnelsv1.CreateResponse, error) {
	node, err := apierr.ParseID("node_id", req.GetNodeId())
	if err != nil {
		return nil, err
	}
	port := req.GetPort()
	if port < 1 || port > 65535 {
		return nil, apierr.InvalidArgument("port", "must be a port, 1 to 65535, got %d", port)
	}
	base, err := s.ticketBase(ctx)
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	ticket, hash := tunnelhop.NewTicket()
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*tunnelsv1.CreateResponse, error) {
		lease, err := allowed(ctx, tx.Q, p.TenantID, node, port)
		if err != nil {
			return nil, err
		}
		id := uuid.Must(uuid.NewV7())
		tx.Target("tunnel", id)
		row, err := tx.Q.CreateTunnel(ctx, db.CreateTunnelParams{
			ID: id, TenantID: p.TenantID, NodeID: node, Port: port, LeaseID: lease, PrincipalID: &p.ID,
			TicketHash: hash, TtlMs: tunnelhop.TicketTTL.Milliseconds(),
		})
		if err != nil {
			return nil, err
		}
		return &tunnelsv1.CreateResponse{
			Ticket: ticket, Url: base + ticket, ExpireTime: timestamppb.New(row.ExpiresAt), Tunnel: toProto(row, time.Now()),
		}, nil
	})
}

// allowed decides whether tenant may open a tunnel to port on node: a node of the tenant that is
// neither revoked nor retired, whose spec lists the port; or another tenant's node on which a
// placed or at-risk lease of the tenant holds an allocation, in a pool that lists the port (the
// lease is returned). A node the tenant may not see is not found, as an unknown one.
func allowed(ctx context.Context, q *db.Queries, tenant, node uuid.UUID, port int32) (*uuid.UUID, error) {
	n, err := q.GetNodeWithSession(ctx, db.GetNodeWithSessionParams{TenantID: tenant, ID: node})
	if err == nil {
		if err := usable(node, n.RevokedAt, n.State); err != nil {
			return nil, err
		}
		spec, err := fleet.DecodeSpec(n.Spec)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(spec.TunnelPorts, port) {
			return nil, apierr.FailedPreconditionField("port", "%d is not among the tunnel ports of node %s's spec (%s)",
				port, node, portList(spec.TunnelPorts))
		}
		return nil, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	leases, err := q.TunnelLeasesOnNode(ctx, db.TunnelLeasesOnNodeParams{TenantID: tenant, NodeID: node})
	if err != nil {
		return nil, err
	}
	if len(leases) == 0 {
		return nil, apierr.NotFound("node %s not found", node)
	}
	if err := usable(node, leases[0].RevokedAt, leases[0].State); err != nil {
		return nil, err
	}
	var ports []int32
	for _, l := range leases {
		if slices.Contains(l.TunnelPorts, port) {
			return &l.LeaseID, nil
		}
		ports = append(ports, l.TunnelPorts...)
	}
	slices.Sort(ports)
	return nil, apierr.FailedPreconditionField("port", "%d is not among the tunnel ports of the pool of the tenant's lease on node %s (%s)",
		port, node, portList(slices.Compact(ports)))
}

// usable refuses a revoked or retired node.
func usable(node uuid.UUID, revokedAt *time.Time, state db.NodeState) error {
	switch {
	case revokedAt != nil:
		return apierr.FailedPrecondition("node %s is revoked", node)
	case state == db.NodeStateRetired:
		return apierr.FailedPrecondition("node %s is retired", node)
	}
	return nil
}

func portList(ports []int32) string {
	if len(ports) == 0 {
		return "none"
	}
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ", ")
}

// List lists the tenant's tunnels, newest first.
func (s *Service) List(ctx context.Context, req *tunnelsv1.ListRequest) (*tunnelsv1.ListResponse, error) {
	node, err := apierr.ParseOptionalID("node_id", req.GetNodeId())
	if err != nil {
		return nil, err
	}
	size, before, err := page.Of(req.GetPageSize(), req.GetPageToken(), uuid.Max)
	if err != nil {
		return nil, err
	}
	rows, err := db.New(s.pool).ListTunnels(ctx, db.ListTunnelsParams{
		TenantID: auth.Caller(ctx).TenantID, Before: before, NodeID: node, IncludeClosed: req.GetIncludeClosed(), Lim: size + 1,
	})
	if err != nil {
		return nil, err
	}
	rows, next := page.Next(rows, size, func(t db.Tunnel) uuid.UUID { return t.ID })
	now := time.Now()
	res := &tunnelsv1.ListResponse{NextPageToken: next}
	for _, t := range rows {
		res.Tunnels = append(res.Tunnels, toProto(t, now))
	}
	return res, nil
}

// CloseTunnel asks the API relaying an open tunnel of the tenant to end it (tunnel.CodeTunnelsClosed)
// and closes an unused ticket at once; a closed tunnel is returned unchanged. When this process
// relays the tunnel it ends it now, else the relaying process's watcher does within about a
// second (watch.go).
func (s *Service) CloseTunnel(ctx context.Context, req *tunnelsv1.CloseTunnelRequest) (*tunnelsv1.CloseTunnelResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	requested := false
	res, err := admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*tunnelsv1.CloseTunnelResponse, error) {
		tx.Target("tunnel", id)
		row, err := tx.Q.RequestTunnelClose(ctx, db.RequestTunnelCloseParams{
			TenantID: p.TenantID, ID: id, CloseCode: int32(tunnel.CodeTunnelsClosed), CloseReason: scrub.Truncate("closed by "+p.Name, 200),
		})
		if errors.Is(err, pgx.ErrNoRows) {
			row, err = tx.Q.GetTunnel(ctx, db.GetTunnelParams{TenantID: p.TenantID, ID: id})
		} else {
			requested = err == nil
		}
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "tunnel %s not found", id)
		}
		return &tunnelsv1.CloseTunnelResponse{Tunnel: toProto(row, time.Now())}, nil
	})
	if err == nil && requested {
		s.abort(id, tunnel.CodeTunnelsClosed, "closed by "+p.Name)
	}
	return res, err
}

// lapsedReason is how a tunnel whose relaying API went away without recording its end is shown.
const lapsedReason = "the API relaying it went away"

// toProto is a tunnel's API form at now: an open tunnel whose relay lease lapsed is shown closed
// at its lapse, with tunnel.CodeInternal.
func toProto(t db.Tunnel, now time.Time) *tunnelsv1.Tunnel {
	out := &tunnelsv1.Tunnel{
		Id: t.ID.String(), TenantId: t.TenantID.String(), NodeId: t.NodeID.String(), Port: t.Port,
		CreateTime: timestamppb.New(t.CreatedAt), CloseReason: t.CloseReason,
		BytesToNode: t.BytesToNode, BytesFromNode: t.BytesFromNode,
	}
	if t.LeaseID != nil {
		out.LeaseId = t.LeaseID.String()
	}
	if t.PrincipalID != nil {
		out.PrincipalId = t.PrincipalID.String()
	}
	switch {
	case t.OpenedAt == nil:
		if t.ClosedAt == nil {
			out.ExpireTime = timestamppb.New(t.ExpiresAt)
		}
	default:
		out.OpenTime = timestamppb.New(*t.OpenedAt)
	}
	switch {
	case t.ClosedAt != nil:
		out.CloseTime = timestamppb.New(*t.ClosedAt)
		if t.CloseCode != nil {
			out.CloseCode = *t.CloseCode
		}
	case t.OpenedAt != nil && !t.ExpiresAt.After(now):
		out.CloseTime, out.CloseCode, out.CloseReason = timestamppb.New(t.ExpiresAt), int32(tunnel.CodeInternal), lapsedReason
	}
	return out
}

// originKey carries the scheme and host a tunnels/create request came to, for its ticket's URL.
type originKey struct{}

// WithOrigin wraps the service's Connect handler so that, without a configured base URL, a
// ticket's URL names the host (and scheme: wss over TLS, else ws) the create request reached.
func WithOrigin(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme := "ws://"
		if r.TLS != nil {
			scheme = "wss://"
		}
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), originKey{}, scheme+r.Host)))
	})
}

// ticketBase is a ticket's URL but for the ticket: {base URL}{basePath}/tunnels/, with the
// WebSocket scheme of the base URL's.
func (s *Service) ticketBase(ctx context.Context) (string, error) {
	origin := strings.TrimSuffix(s.opts.BaseURL, "/")
	switch {
	case strings.HasPrefix(origin, "https://"):
		origin = "wss://" + strings.TrimPrefix(origin, "https://")
	case strings.HasPrefix(origin, "http://"):
		origin = "ws://" + strings.TrimPrefix(origin, "http://")
	default:
		o, ok := ctx.Value(originKey{}).(string)
		if !ok || strings.HasSuffix(o, "://") {
			return "", errors.New("tunnels: no base URL configured and no host in the request")
		}
		origin = o
	}
	return origin + s.opts.BasePath + "/tunnels/", nil
}
