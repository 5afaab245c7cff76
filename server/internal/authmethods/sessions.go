package authmethods

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/page"
)

// sessionCursor is a sessions/list page token's key: the last session seen, newest first.
type sessionCursor struct {
	Time time.Time `json:"t"`
	ID   string    `json:"i"`
}

// firstSessions is before every session: the first page starts there.
var firstSessions = sessionCursor{Time: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), ID: "~"}

// ListSessions lists the caller's tenant's sessions that have not ended, newest first.
func (s *Service) ListSessions(ctx context.Context, req *authv1.ListSessionsRequest) (*authv1.ListSessionsResponse, error) {
	size, before, err := page.Of(req.GetPageSize(), req.GetPageToken(), firstSessions)
	if err != nil {
		return nil, err
	}
	rows, err := db.New(s.pool).ListSessions(ctx, db.ListSessionsParams{
		TenantID: auth.Caller(ctx).TenantID, IdleAfter: time.Now().Add(-s.sessions.IdleTimeout()),
		BeforeTime: before.Time, BeforeID: before.ID, Lim: size + 1,
	})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	rows, next := page.Next(rows, size, func(r db.ListSessionsRow) sessionCursor { return sessionCursor{Time: r.CreatedAt, ID: r.ID} })
	res := &authv1.ListSessionsResponse{Sessions: []*authv1.Session{}, NextPageToken: next}
	for _, r := range rows {
		res.Sessions = append(res.Sessions, &authv1.Session{
			Id: r.ID, TenantId: r.TenantID.String(), PrincipalId: r.PrincipalID.String(), Method: r.MethodName, Kind: r.Kind,
			CreateTime: timestamppb.New(r.CreatedAt), LastUsedTime: timestamppb.New(r.LastUsedAt), ExpireTime: timestamppb.New(r.ExpiresAt),
		})
	}
	return res, nil
}

// RevokeSession ends a session of the caller's tenant.
func (s *Service) RevokeSession(ctx context.Context, req *authv1.RevokeSessionRequest) (*authv1.RevokeSessionResponse, error) {
	if !auth.ValidSessionID(req.GetId()) {
		return nil, apierr.InvalidArgument("id", "not a session id")
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*authv1.RevokeSessionResponse, error) {
		tx.Target("session", req.GetId())
		n, err := tx.Q.RevokeSession(ctx, db.RevokeSessionParams{TenantID: p.TenantID, ID: req.GetId()})
		if err != nil {
			return nil, fmt.Errorf("revoke session %s: %w", req.GetId(), err)
		}
		if n == 0 {
			return nil, apierr.NotFound("session %s not found (or already ended)", req.GetId())
		}
		return &authv1.RevokeSessionResponse{}, nil
	})
}

// SignOut ends the caller's session; a call with an API key ends nothing.
func (s *Service) SignOut(ctx context.Context, _ *authv1.SignOutRequest) (*authv1.SignOutResponse, error) {
	p := auth.Caller(ctx)
	if p.SessionID == "" {
		return &authv1.SignOutResponse{}, nil
	}
	n, err := db.New(s.pool).RevokeSession(ctx, db.RevokeSessionParams{TenantID: p.TenantID, ID: p.SessionID})
	if err != nil {
		return nil, fmt.Errorf("end session %s: %w", p.SessionID, err)
	}
	return &authv1.SignOutResponse{Ended: n > 0}, nil
}
