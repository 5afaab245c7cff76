package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/quota"
	"github.com/better-compute/better-compute/internal/requestid"
)

// Bounds of what a sign-in takes from the provider's claims.
const (
	// MaxSubjectLen bounds the provider's subject: with the method's name it makes the
	// principal's name, which the database bounds to 128 characters.
	MaxSubjectLen = 200
	// maxPrincipalName is principals.name's bound.
	maxPrincipalName = 128
	// maxEmailLen bounds an email claim; a longer one is not stored.
	maxEmailLen = 254
	// MaxDisplayNameLen bounds a name claim; a longer one is cut.
	MaxDisplayNameLen = 200
	// signInAttempts bounds the retries of a first sign-in that raced another one of the same
	// subject.
	signInAttempts = 3
)

// SignInMethod is the auth method a sign-in went through.
type SignInMethod struct {
	ID       uuid.UUID
	TenantID uuid.UUID
	// Name is the method's name, which prefixes the names of the principals it creates.
	Name string
}

// SignInParams are what a verified token and the method's binding rules (sso.Evaluate) say.
type SignInParams struct {
	Method SignInMethod
	// Issuer and Subject identify the person or machine at the provider: the principal is
	// linked by them and the method, never by email.
	Issuer  string
	Subject string
	// Email and Name are the claims' (bounded; Name is not stored: principals have no display
	// name).
	Email string
	Name  string
	// TenantID is the tenant the rules chose: the method's (uuid.Nil means that too) or one
	// below it.
	TenantID uuid.UUID
	// Roles are the rules' roles, which replace the principal's bindings from rules; never
	// owner.
	Roles []Role
}

// errSignInRace is a first sign-in that lost the race to link its subject to another one's.
var errSignInRace = errors.New("a concurrent sign-in linked the subject first")

// SignIn finds the principal that this method linked to the provider's issuer and subject in the
// rules' tenant, or creates it (a user named "<method>:<subject>", within the tenant's cap on
// principals), records the sign-in, replaces its role bindings from rules by p.Roles (bindings
// made through the API stay), writes an audit row (auth/signIn), and returns it with its
// effective roles: all in one transaction. An identity belongs to the method that created it: a
// sign-in through another method, whatever its issuer, never finds it (nor one whose method was
// deleted), and makes a principal of its own. A suspended or deleted tenant is refused with
// PermissionDenied. The caps are those ctx carries (quota.WithLimits), the defaults otherwise.
func SignIn(ctx context.Context, pool *pgxpool.Pool, p SignInParams) (*Principal, error) {
	if p.TenantID == uuid.Nil {
		p.TenantID = p.Method.TenantID
	}
	if p.Subject == "" || utf8.RuneCountInString(p.Subject) > MaxSubjectLen || !utf8.ValidString(p.Subject) {
		return nil, apierr.PermissionDenied("the identity provider's subject must be 1 to %d characters of UTF-8; this one is not", MaxSubjectLen)
	}
	if p.Issuer == "" {
		return nil, errors.New("sign in: no issuer")
	}
	if slices.Contains(p.Roles, RoleOwner) {
		return nil, apierr.PermissionDenied("binding rules cannot grant the owner role")
	}
	for attempt := 1; ; attempt++ {
		var out *Principal
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			out, err = signIn(ctx, db.New(tx), p)
			return err
		})
		if errors.Is(err, errSignInRace) && attempt < signInAttempts {
			continue
		}
		if err != nil {
			return nil, err
		}
		return out, nil
	}
}

func signIn(ctx context.Context, q *db.Queries, p SignInParams) (*Principal, error) {
	t, err := q.GetTenant(ctx, db.GetTenantParams{TenantID: p.TenantID, ID: p.TenantID})
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && t.DeletedAt != nil) {
		return nil, apierr.PermissionDenied("the tenant the binding rules chose (%s) does not exist", p.TenantID)
	}
	if err != nil {
		return nil, fmt.Errorf("sign in: read tenant %s: %w", p.TenantID, err)
	}
	if t.SuspendedAt != nil {
		return nil, apierr.PermissionDenied("tenant %s is suspended: sign-in is refused until the root tenant resumes it", t.Name)
	}
	email := p.Email
	if len(email) > maxEmailLen || !utf8.ValidString(email) {
		email = ""
	}
	var principalID uuid.UUID
	var name string
	id, err := q.GetIdentity(ctx, db.GetIdentityParams{TenantID: t.ID, AuthMethodID: p.Method.ID, Issuer: p.Issuer, Subject: p.Subject})
	switch {
	case err == nil:
		principalID, name = id.PrincipalID, id.PrincipalName
		if email != "" {
			if err := q.SetPrincipalEmail(ctx, db.SetPrincipalEmailParams{TenantID: t.ID, ID: principalID, Email: email}); err != nil {
				return nil, fmt.Errorf("sign in: update email of principal %s: %w", principalID, err)
			}
		}
		if err := q.TouchIdentity(ctx, db.TouchIdentityParams{TenantID: t.ID, PrincipalID: principalID}); err != nil {
			return nil, fmt.Errorf("sign in: record sign-in of principal %s: %w", principalID, err)
		}
	case errors.Is(err, pgx.ErrNoRows):
		principalID, name, err = createSignInPrincipal(ctx, q, t.ID, p, email)
		if err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("sign in: find identity: %w", err)
	}
	if err := q.DeleteRuleBindings(ctx, db.DeleteRuleBindingsParams{TenantID: t.ID, PrincipalID: principalID}); err != nil {
		return nil, fmt.Errorf("sign in: remove rule bindings of principal %s: %w", principalID, err)
	}
	for _, r := range p.Roles {
		if _, err := ParseRole(string(r)); err != nil {
			return nil, fmt.Errorf("sign in: %w", err)
		}
		if err := q.AddRuleBinding(ctx, db.AddRuleBindingParams{
			ID: uuid.Must(uuid.NewV7()), TenantID: t.ID, PrincipalID: principalID, Role: string(r),
		}); err != nil {
			return nil, fmt.Errorf("sign in: bind role %s to principal %s: %w", r, principalID, err)
		}
	}
	roles, err := q.PrincipalRoles(ctx, db.PrincipalRolesParams{TenantID: t.ID, PrincipalID: principalID})
	if err != nil {
		return nil, fmt.Errorf("sign in: read roles of principal %s: %w", principalID, err)
	}
	if err := q.InsertAuditEvent(ctx, db.InsertAuditEventParams{
		TenantID: &t.ID, PrincipalID: &principalID, Method: "auth/signIn",
		Target: "authMethod/" + p.Method.Name, Outcome: "ok", RequestID: requestid.From(ctx),
	}); err != nil {
		return nil, fmt.Errorf("sign in: audit: %w", err)
	}
	out := &Principal{ID: principalID, TenantID: t.ID, Kind: "user", Name: name, RootTenant: t.IsRoot}
	for _, r := range Roles {
		if slices.Contains(roles, string(r)) {
			out.Roles = append(out.Roles, r)
		}
	}
	return out, nil
}

// createSignInPrincipal creates the user a first sign-in makes, linked to the provider's
// subject. It returns errSignInRace when a concurrent sign-in linked the subject first (the
// caller retries, and then finds it).
func createSignInPrincipal(ctx context.Context, q *db.Queries, tenant uuid.UUID, p SignInParams, email string) (uuid.UUID, string, error) {
	if err := quota.Check(ctx, q, tenant, quota.Principals, 1); err != nil {
		return uuid.Nil, "", err
	}
	name, err := freePrincipalName(ctx, q, tenant, p)
	if err != nil {
		return uuid.Nil, "", err
	}
	pr, err := q.CreatePrincipal(ctx, db.CreatePrincipalParams{
		ID: uuid.Must(uuid.NewV7()), TenantID: tenant, Kind: "user", Name: name, Email: email,
	})
	if err != nil {
		return uuid.Nil, "", fmt.Errorf("sign in: create principal %q: %w", name, err)
	}
	n, err := q.CreateIdentity(ctx, db.CreateIdentityParams{
		PrincipalID: pr.ID, TenantID: tenant, Issuer: p.Issuer, Subject: p.Subject, AuthMethodID: p.Method.ID,
	})
	if err != nil {
		return uuid.Nil, "", fmt.Errorf("sign in: link principal %s to its identity: %w", pr.ID, err)
	}
	if n == 0 {
		return uuid.Nil, "", errSignInRace
	}
	return pr.ID, pr.Name, nil
}

// freePrincipalName picks the name of a principal a first sign-in makes: "<method>:<subject>",
// or when a principal has it (made through the API, or by a method of the same name deleted
// since, whose principals are never taken over) the name with a digest of the subject, or of the
// method's id and the subject.
func freePrincipalName(ctx context.Context, q *db.Queries, tenant uuid.UUID, p SignInParams) (string, error) {
	for _, name := range []string{
		principalName(p.Method.Name, p.Subject, false, ""),
		principalName(p.Method.Name, p.Subject, true, ""),
		principalName(p.Method.Name, p.Subject, true, p.Method.ID.String()),
	} {
		_, err := q.GetPrincipalByName(ctx, db.GetPrincipalByNameParams{TenantID: tenant, Name: name})
		if errors.Is(err, pgx.ErrNoRows) {
			return name, nil
		}
		if err != nil {
			return "", fmt.Errorf("sign in: look up principal %q: %w", name, err)
		}
	}
	return "", apierr.FailedPrecondition("sign in: the principal names for subject %q of auth method %q are all taken", p.Subject, p.Method.Name)
}

// principalName is "<method>:<subject>", cut to principals.name's bound with a digest of the
// subject (or of salt and the subject, when salt is set) in place of its end when it is longer,
// or always when hashed (the plain name is taken).
func principalName(method, subject string, hashed bool, salt string) string {
	name := method + ":" + subject
	if !hashed && len(name) <= maxPrincipalName {
		return name
	}
	sum := sha256.Sum256([]byte(subject))
	if salt != "" {
		sum = sha256.Sum256([]byte(salt + "\x00" + subject))
	}
	suffix := "~" + hex.EncodeToString(sum[:8])
	keep := maxPrincipalName - len(suffix)
	if len(name) > keep {
		name = name[:keep]
	}
	return strings.ToValidUTF8(name, "") + suffix
}
