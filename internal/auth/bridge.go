package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/apierr"
)

// Bridge connects the API to an IAM system. The API asks it who is calling and whether they
// may call a method; nothing else in the server knows how identities are stored.
type Bridge interface {
	// Authenticate resolves the request's credential. It returns (nil, nil) when the request
	// carries none, an Unauthenticated error when it carries a bad one, and a PermissionDenied
	// error when the credential's tenant is suspended.
	Authenticate(ctx context.Context, header http.Header) (*Principal, error)
	// Authorize returns nil when p may call a method that requires permission, and a
	// PermissionDenied error otherwise.
	Authorize(ctx context.Context, p *Principal, permission string) error
}

// Embedded is the built-in IAM: API keys, sessions and role bindings in the deployment's
// database.
type Embedded struct {
	pool     *pgxpool.Pool
	log      *slog.Logger
	now      func() time.Time
	sessions SessionLifetimes
}

var _ Bridge = (*Embedded)(nil)

// NewEmbedded returns the built-in IAM over pool.
func NewEmbedded(pool *pgxpool.Pool, log *slog.Logger) *Embedded {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Embedded{pool: pool, log: log, now: time.Now}
}

// Authenticate accepts "Authorization: Bearer bck_…" (an API key), "Authorization: Bearer
// bcs_…" (a session token) and, only together with the X-Better-Compute header, the session
// cookie; the Authorization header wins over the cookie. Credentials of a suspended tenant are
// refused with PermissionDenied, from the commit of the suspension on: the tenant's status is
// read with the key or session, at every call.
func (e *Embedded) Authenticate(ctx context.Context, header http.Header) (*Principal, error) {
	authz := header.Get("Authorization")
	var bearer string
	if authz != "" {
		scheme, token, ok := strings.Cut(authz, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return nil, apierr.Unauthenticated("Authorization header: want \"Bearer <API key or session token>\"")
		}
		bearer = strings.TrimSpace(token)
	}
	if session, ok := sessionCredential(header, bearer); ok {
		return e.authenticateSession(ctx, session)
	}
	if bearer == "" {
		return nil, nil
	}
	key, err := ParseKey(bearer)
	if err != nil {
		return nil, apierr.Unauthenticated("Authorization header: %v", err)
	}
	q := db.New(e.pool)
	row, err := q.AuthenticateAPIKey(ctx, key.ID)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !key.Matches(row.SecretHash)) {
		// Unknown and wrong keys look alike, so keys cannot be probed.
		return nil, apierr.Unauthenticated("API key %s is not valid (deleted or never issued)", key.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("authenticate API key %s: %w", key.ID, err)
	}
	if row.DeletedAt != nil {
		// Deletion deletes the tenant's keys: a key that outlived it is not valid either.
		return nil, apierr.Unauthenticated("API key %s is not valid (deleted or never issued)", key.ID)
	}
	if row.SuspendedAt != nil {
		return nil, suspended(row.TenantName, *row.SuspendedAt, "API keys")
	}
	now := e.now()
	if row.ExpiresAt != nil && !now.Before(*row.ExpiresAt) {
		return nil, apierr.Unauthenticated("API key %s expired at %s", key.ID, row.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if row.LastUsedAt == nil || now.Sub(*row.LastUsedAt) > time.Minute {
		// A failure here must not fail the call: last-used time is advisory.
		if err := q.TouchAPIKey(ctx, key.ID); err != nil {
			e.log.WarnContext(ctx, "record API key use", "api_key_id", key.ID, "err", err)
		}
	}
	p := principalOf(row.PrincipalID, row.TenantID, row.Kind, row.PrincipalName, row.IsRoot, row.Roles)
	p.KeyID = key.ID
	return p, nil
}

// principalOf is the principal a credential (an API key, a session) authenticates.
func principalOf(id, tenant uuid.UUID, kind, name string, root bool, roles []string) *Principal {
	p := &Principal{ID: id, TenantID: tenant, Kind: kind, Name: name, RootTenant: root}
	for _, r := range roles {
		p.Roles = append(p.Roles, Role(r))
	}
	return p
}

// suspended refuses the credentials (what: "API keys", "sessions") of a suspended tenant.
func suspended(tenant string, since time.Time, what string) error {
	return apierr.PermissionDenied("tenant %s is suspended (since %s): its %s are refused until the root tenant resumes it",
		tenant, since.UTC().Format(time.RFC3339), what)
}

// rootOnly are the permissions only principals of the root tenant hold, whatever their role:
// changing tenants themselves (creating, suspending, resuming and deleting those below it).
var rootOnly = map[string]string{
	"tenants.create": "create tenants",
	"tenants.write":  "suspend or resume tenants",
	"tenants.delete": "delete tenants",
}

// Authorize decides by the principal's roles. The rootOnly permissions are reserved to the root
// tenant, whatever the role.
func (e *Embedded) Authorize(_ context.Context, p *Principal, permission string) error {
	if what, ok := rootOnly[permission]; ok && !p.RootTenant {
		return apierr.PermissionDenied("only principals of the root tenant may %s", what)
	}
	if !p.Can(permission) {
		return apierr.PermissionDenied("permission %s is not granted to principal %s (roles: %s)", permission, p.Name, rolesString(p.Roles))
	}
	return nil
}

func rolesString(roles []Role) string {
	if len(roles) == 0 {
		return "none"
	}
	s := make([]string, len(roles))
	for i, r := range roles {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}
