// Package jointokens implements bettercompute.jointokens.v1.JoinTokensService: minting, listing
// and revoking the join tokens of the caller's tenant. The database keeps only the SHA-256 of a
// token's secret; the token itself is returned once, by Create (and sealed in its stored
// idempotent response).
package jointokens

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	jointokensv1 "github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1/jointokensv1connect"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/page"
	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/internal/pki/cahash"
	"github.com/better-compute/better-compute/internal/quota"
)

// Limits of a new token.
const (
	DefaultTTL        = time.Hour
	MaxTTL            = 30 * 24 * time.Hour
	maxDescriptionLen = 256
)

// poolName is the syntax of a pool: a label value that is not empty.
var poolName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$`)

// Service answers JoinTokensService calls.
type Service struct {
	pool  *pgxpool.Pool
	admit *admission.Admitter
	now   func() time.Time
	// rootHash caches the root CA's pin once read: the root never changes.
	rootHash atomic.Pointer[string]
}

var _ jointokensv1connect.JoinTokensServiceHandler = (*Service)(nil)

// New returns the service.
func New(pool *pgxpool.Pool, admit *admission.Admitter) *Service {
	return &Service{pool: pool, admit: admit, now: time.Now}
}

// Create mints a join token.
func (s *Service) Create(ctx context.Context, req *jointokensv1.CreateRequest) (*jointokensv1.CreateResponse, error) {
	if utf8.RuneCountInString(req.GetDescription()) > maxDescriptionLen {
		return nil, apierr.InvalidArgument("description", "must be at most %d characters", maxDescriptionLen)
	}
	if p := req.GetPool(); p != "" && !poolName.MatchString(p) {
		return nil, apierr.InvalidArgument("pool", "must be empty or 1 to 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit")
	}
	if err := fleet.ValidateLabels("labels", req.GetLabels()); err != nil {
		return nil, err
	}
	maxUses := req.GetMaxUses()
	switch {
	case maxUses < 0 || maxUses > fleet.MaxJoinTokenUses:
		return nil, apierr.InvalidArgument("max_uses", "must be 1 to %d (0 means 1), got %d", fleet.MaxJoinTokenUses, maxUses)
	case maxUses == 0:
		maxUses = 1
	}
	now := s.now()
	expires := now.Add(DefaultTTL)
	if et := req.GetExpireTime(); et != nil {
		if err := et.CheckValid(); err != nil {
			return nil, apierr.InvalidArgument("expire_time", "%v", err)
		}
		expires = et.AsTime()
		if !expires.After(now) {
			return nil, apierr.InvalidArgument("expire_time", "must be in the future")
		}
		if expires.Sub(now) > MaxTTL {
			return nil, apierr.InvalidArgument("expire_time", "must be at most 30 days ahead")
		}
	}
	pin, err := s.caCertHash(ctx)
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*jointokensv1.CreateResponse, error) {
		if err := quota.Check(ctx, tx.Q, p.TenantID, quota.JoinTokens, 1); err != nil {
			return nil, err
		}
		key := auth.NewJoinToken()
		t, err := tx.Q.CreateJoinToken(ctx, db.CreateJoinTokenParams{
			ID: key.ID, TenantID: p.TenantID, Description: req.GetDescription(), Pool: req.GetPool(),
			Labels: fleet.EncodeLabels(req.GetLabels()), SecretHash: key.Hash(), MaxUses: maxUses, ExpiresAt: expires,
		})
		if err != nil {
			return nil, err
		}
		tx.Target("joinToken", t.ID)
		jt, err := toProto(t, now)
		if err != nil {
			return nil, err
		}
		return &jointokensv1.CreateResponse{JoinToken: jt, Token: key.String(), CaCertHash: pin}, nil
	})
}

// List lists the tenant's join tokens by id.
func (s *Service) List(ctx context.Context, req *jointokensv1.ListRequest) (*jointokensv1.ListResponse, error) {
	size, after, err := page.Of(req.GetPageSize(), req.GetPageToken(), "")
	if err != nil {
		return nil, err
	}
	rows, err := db.New(s.pool).ListJoinTokens(ctx, db.ListJoinTokensParams{TenantID: auth.Caller(ctx).TenantID, After: after, Lim: size + 1})
	if err != nil {
		return nil, err
	}
	rows, next := page.Next(rows, size, func(t db.JoinToken) string { return t.ID })
	res := &jointokensv1.ListResponse{NextPageToken: next}
	now := s.now()
	for _, t := range rows {
		jt, err := toProto(t, now)
		if err != nil {
			return nil, err
		}
		res.JoinTokens = append(res.JoinTokens, jt)
	}
	return res, nil
}

// Revoke revokes a join token of the tenant; revoking a revoked token changes nothing.
func (s *Service) Revoke(ctx context.Context, req *jointokensv1.RevokeRequest) (*jointokensv1.RevokeResponse, error) {
	if req.GetId() == "" {
		return nil, apierr.InvalidArgument("id", "required")
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*jointokensv1.RevokeResponse, error) {
		tx.Target("joinToken", req.GetId())
		t, err := tx.Q.RevokeJoinToken(ctx, db.RevokeJoinTokenParams{TenantID: p.TenantID, ID: req.GetId()})
		if err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return nil, apierr.NotFound("join token %s not found", req.GetId())
			}
			return nil, err
		}
		jt, err := toProto(t, s.now())
		if err != nil {
			return nil, err
		}
		return &jointokensv1.RevokeResponse{JoinToken: jt}, nil
	})
}

// toProto describes a token, never its secret.
func toProto(t db.JoinToken, now time.Time) (*jointokensv1.JoinToken, error) {
	labels, err := fleet.DecodeLabels(t.Labels)
	if err != nil {
		return nil, err
	}
	out := &jointokensv1.JoinToken{
		Id: t.ID, TenantId: t.TenantID.String(), Description: t.Description, Pool: t.Pool, Labels: labels,
		MaxUses: t.MaxUses, Uses: t.Uses, ExpireTime: timestamppb.New(t.ExpiresAt), Expired: !t.ExpiresAt.After(now),
		Revoked: t.RevokedAt != nil, CreateTime: timestamppb.New(t.CreatedAt),
	}
	if t.RevokedAt != nil {
		out.RevokeTime = timestamppb.New(*t.RevokedAt)
	}
	return out, nil
}

// caCertHash is the root CA's pin that Create returns beside the token (bcd join
// --ca-cert-hash), read from the database, which holds the root's certificate (public; no
// secret needed); empty before `pki init`.
func (s *Service) caCertHash(ctx context.Context) (string, error) {
	if h := s.rootHash.Load(); h != nil {
		return *h, nil
	}
	root, err := pki.RootPEM(ctx, s.pool)
	if errors.Is(err, pki.ErrNotInitialized) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("join tokens: the root CA's pin: %w", err)
	}
	h, err := cahash.OfPEM(root)
	if err != nil {
		return "", fmt.Errorf("join tokens: the root CA's pin: %w", err)
	}
	s.rootHash.Store(&h)
	return h, nil
}
