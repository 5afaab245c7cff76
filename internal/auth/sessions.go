package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/apierr"
)

// SessionPrefix starts every session token, "bcs_<id>_<secret>", like API keys (see Key): the
// id finds the session's row, the secret is stored only as its SHA-256.
const SessionPrefix = "bcs_"

// SessionCookie is the dashboard's session cookie. The API accepts it only on requests that
// also carry the X-Better-Compute header, which a browser cannot add across origins: the
// header is the CSRF guard, the cookie alone never authenticates.
const SessionCookie = "bc_session"

// clientHeader is the CSRF guard's header (guard.ClientHeader, which imports this package).
const clientHeader = "X-Better-Compute"

// The kinds of session.
const (
	// SessionBrowser is the dashboard's cookie.
	SessionBrowser = "browser"
	// SessionCLI is a token from a code flow the CLI received (loopback) or the device flow.
	SessionCLI = "cli"
	// SessionToken is a token from auth/exchangeToken.
	SessionToken = "token"
)

// ErrMalformedSessionToken is returned for a string that is not a session token.
var ErrMalformedSessionToken = errors.New("malformed session token (want bcs_<id>_<secret>)")

// NewSessionToken mints a random session token.
func NewSessionToken() Key { return newKey(SessionPrefix) }

// ParseSessionToken splits a session token into its id and secret.
func ParseSessionToken(s string) (Key, error) {
	return parse(SessionPrefix, s, ErrMalformedSessionToken)
}

// SessionLifetimes bound sessions (config auth.sessions): a session ends Absolute after it
// started, or sooner after Idle without use.
type SessionLifetimes struct {
	Idle     time.Duration
	Absolute time.Duration
}

// Default session lifetimes, those of the configuration's defaults.
const (
	DefaultSessionIdle     = 12 * time.Hour
	DefaultSessionAbsolute = 7 * 24 * time.Hour
)

// IdleTimeout is the idle timeout, DefaultSessionIdle when unset.
func (l SessionLifetimes) IdleTimeout() time.Duration {
	if l.Idle <= 0 {
		return DefaultSessionIdle
	}
	return l.Idle
}

// AbsoluteTimeout is the absolute lifetime, DefaultSessionAbsolute when unset.
func (l SessionLifetimes) AbsoluteTimeout() time.Duration {
	if l.Absolute <= 0 {
		return DefaultSessionAbsolute
	}
	return l.Absolute
}

// WithSessionLifetimes sets the idle timeout sessions are checked against (the absolute one is
// stored in each session when it starts); the defaults until called.
func (e *Embedded) WithSessionLifetimes(l SessionLifetimes) *Embedded {
	e.sessions = l
	return e
}

// SessionParams describe a session to start.
type SessionParams struct {
	TenantID    uuid.UUID
	PrincipalID uuid.UUID
	// AuthMethodID is the method it signed in through (nil for none).
	AuthMethodID *uuid.UUID
	// Kind is SessionBrowser, SessionCLI or SessionToken.
	Kind string
	// ExpiresAt is its absolute end; zero means now plus the absolute lifetime.
	ExpiresAt time.Time
}

// Session is a started session and its token, which is shown only now.
type Session struct {
	ID        string
	Token     string
	ExpiresAt time.Time
}

// CreateSession starts a session in tx (the sign-in's transaction, so the session exists only
// if the sign-in commits). An ExpiresAt past now plus the absolute lifetime is cut to it.
func CreateSession(ctx context.Context, tx db.DBTX, l SessionLifetimes, p SessionParams) (Session, error) {
	switch p.Kind {
	case SessionBrowser, SessionCLI, SessionToken:
	default:
		return Session{}, fmt.Errorf("start session: unknown kind %q", p.Kind)
	}
	limit := time.Now().Add(l.AbsoluteTimeout())
	expires := p.ExpiresAt
	if expires.IsZero() || expires.After(limit) {
		expires = limit
	}
	tok := NewSessionToken()
	row, err := db.New(tx).CreateSession(ctx, db.CreateSessionParams{
		ID: tok.ID, TenantID: p.TenantID, PrincipalID: p.PrincipalID, AuthMethodID: p.AuthMethodID,
		Kind: p.Kind, SecretHash: tok.Hash(), ExpiresAt: expires,
	})
	if err != nil {
		return Session{}, fmt.Errorf("start %s session of principal %s: %w", p.Kind, p.PrincipalID, err)
	}
	return Session{ID: row.ID, Token: tok.String(), ExpiresAt: row.ExpiresAt}, nil
}

// sessionCredential returns the session token of a request that carries one: a bearer
// "bcs_…", or the session cookie with the X-Better-Compute header. ok is false when the
// request carries none (it may carry an API key).
func sessionCredential(header http.Header, bearer string) (string, bool) {
	if bearer != "" {
		if len(bearer) >= len(SessionPrefix) && bearer[:len(SessionPrefix)] == SessionPrefix {
			return bearer, true
		}
		return "", false
	}
	if header.Get(clientHeader) == "" {
		return "", false
	}
	r := http.Request{Header: http.Header{"Cookie": header.Values("Cookie")}}
	c, err := r.Cookie(SessionCookie)
	if err != nil || c.Value == "" {
		return "", false
	}
	return c.Value, true
}

// authenticateSession resolves a session token as Authenticate does an API key: unknown,
// wrong, revoked and ended sessions are Unauthenticated, a suspended tenant's PermissionDenied.
func (e *Embedded) authenticateSession(ctx context.Context, token string) (*Principal, error) {
	tok, err := ParseSessionToken(token)
	if err != nil {
		return nil, apierr.Unauthenticated("session: %v", err)
	}
	q := db.New(e.pool)
	row, err := q.AuthenticateSession(ctx, tok.ID)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && !tok.Matches(row.SecretHash)) {
		return nil, apierr.Unauthenticated("session %s is not valid (ended or never started): sign in again", tok.ID)
	}
	if err != nil {
		return nil, fmt.Errorf("authenticate session %s: %w", tok.ID, err)
	}
	if row.RevokedAt != nil || row.DeletedAt != nil {
		return nil, apierr.Unauthenticated("session %s has ended: sign in again", tok.ID)
	}
	if row.SuspendedAt != nil {
		return nil, suspended(row.TenantName, *row.SuspendedAt, "sessions")
	}
	now := e.now()
	if !now.Before(row.ExpiresAt) {
		return nil, apierr.Unauthenticated("session %s expired at %s: sign in again", tok.ID, row.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if idleEnd := row.LastUsedAt.Add(e.sessions.IdleTimeout()); !now.Before(idleEnd) {
		return nil, apierr.Unauthenticated("session %s ended after %s without use (at %s): sign in again",
			tok.ID, e.sessions.IdleTimeout(), idleEnd.UTC().Format(time.RFC3339))
	}
	if now.Sub(row.LastUsedAt) > time.Minute {
		// Advisory like an API key's last use, but the idle timeout counts from it: a failure
		// is logged, and the next call within the minute tries again.
		if err := q.TouchSession(ctx, tok.ID); err != nil {
			e.log.WarnContext(ctx, "record session use", "session_id", tok.ID, "err", err)
		}
	}
	p := principalOf(row.PrincipalID, row.TenantID, row.Kind, row.PrincipalName, row.IsRoot, row.Roles)
	p.SessionID = tok.ID
	return p, nil
}

// StartSession starts a session in a transaction of its own (CreateSession does it in the
// sign-in's).
func StartSession(ctx context.Context, pool *pgxpool.Pool, l SessionLifetimes, p SessionParams) (Session, error) {
	return CreateSession(ctx, pool, l, p)
}

// ValidSessionID reports whether id has the form of a session's id (the public part of its
// token), for APIs that take one.
func ValidSessionID(id string) bool { return len(id) == keyIDLen && isKeyText(id) }
