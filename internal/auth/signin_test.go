package auth

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/quota"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// fixture is a fresh database with the root tenant, a child tenant and an OIDC method of the
// root tenant.
type fixture struct {
	pool   *pgxpool.Pool
	root   db.Tenant
	child  db.Tenant
	method SignInMethod
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	root, err := EnsureRootTenant(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	q := db.New(pool)
	child, err := q.CreateTenant(ctx, db.CreateTenantParams{ID: uuid.Must(uuid.NewV7()), ParentID: &root.ID, Name: "research"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := q.CreateAuthMethod(ctx, db.CreateAuthMethodParams{
		ID: uuid.Must(uuid.NewV7()), TenantID: root.ID, Name: "okta", Kind: "oidc", Issuer: "https://idp.example.com",
		ClientID: "client", ClientSecretSealed: []byte{}, Scopes: []string{}, RedirectUris: []string{}, Audiences: []string{},
		ClaimPaths: []byte("{}"), Rules: []byte("[]"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{pool: pool, root: root, child: child, method: SignInMethod{ID: m.ID, TenantID: root.ID, Name: m.Name}}
}

func (f *fixture) signIn(t *testing.T, ctx context.Context, subject, email string, tenant uuid.UUID, roles ...Role) (*Principal, error) {
	t.Helper()
	return SignIn(ctx, f.pool, SignInParams{
		Method: f.method, Issuer: "https://idp.example.com", Subject: subject, Email: email, Name: "Ada", TenantID: tenant, Roles: roles,
	})
}

func wantCode(t *testing.T, err error, code connect.Code) {
	t.Helper()
	cerr, _ := apierr.ToConnect(err, "")
	if err == nil || cerr.Code() != code {
		t.Fatalf("error = %v, want %v", err, code)
	}
}

func TestSignInCreatesThenLinksByIssuerAndSubject(t *testing.T) {
	t.Parallel()
	f, ctx := newFixture(t), t.Context()
	p, err := f.signIn(t, ctx, "user-1", "ada@example.com", uuid.Nil, RoleAdmin, RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	if p.TenantID != f.root.ID || p.Kind != "user" || p.Name != "okta:user-1" || !p.RootTenant ||
		!slices.Equal(p.Roles, []Role{RoleAdmin, RoleViewer}) {
		t.Fatalf("principal %+v", p)
	}
	// A changed email links the same principal (never by email), and updates it.
	again, err := f.signIn(t, ctx, "user-1", "ada@new.example.com", uuid.Nil, RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != p.ID || !slices.Equal(again.Roles, []Role{RoleViewer}) {
		t.Fatalf("second sign-in %+v, want principal %s with viewer only", again, p.ID)
	}
	pr, err := db.New(f.pool).GetPrincipal(ctx, db.GetPrincipalParams{TenantID: f.root.ID, ID: p.ID})
	if err != nil || pr.Email != "ada@new.example.com" {
		t.Fatalf("principal %+v %v, want the new email", pr, err)
	}
	// Another subject with the first email is another principal.
	other, err := f.signIn(t, ctx, "user-2", "ada@new.example.com", uuid.Nil, RoleViewer)
	if err != nil || other.ID == p.ID {
		t.Fatalf("other subject: %+v %v", other, err)
	}
	// The sign-in is audited.
	var n int
	if err := f.pool.QueryRow(ctx, "SELECT count(*) FROM audit_events WHERE method = 'auth/signIn' AND principal_id = $1", p.ID).Scan(&n); err != nil || n != 2 {
		t.Fatalf("audit rows %d %v, want 2", n, err)
	}
}

func TestSignInReplacesRuleBindingsOnly(t *testing.T) {
	t.Parallel()
	f, ctx := newFixture(t), t.Context()
	p, err := f.signIn(t, ctx, "user-1", "", f.child.ID, RoleAdmin, RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	if p.TenantID != f.child.ID || p.RootTenant {
		t.Fatalf("principal %+v, want in tenant research", p)
	}
	// A binding made through the API stays; the rules' are replaced.
	if _, err := db.New(f.pool).CreateRoleBinding(ctx, db.CreateRoleBindingParams{
		ID: uuid.Must(uuid.NewV7()), TenantID: f.child.ID, PrincipalID: p.ID, Role: string(RoleOperator),
	}); err != nil {
		t.Fatal(err)
	}
	p, err = f.signIn(t, ctx, "user-1", "", f.child.ID, RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Roles, []Role{RoleOperator, RoleViewer}) {
		t.Fatalf("roles %v, want operator (manual) and viewer (rule): admin removed", p.Roles)
	}
	p, err = f.signIn(t, ctx, "user-1", "", f.child.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.Roles, []Role{RoleOperator}) {
		t.Fatalf("roles %v, want the manual operator only", p.Roles)
	}
	// The same subject in the root tenant is another principal: identities are per tenant.
	inRoot, err := f.signIn(t, ctx, "user-1", "", uuid.Nil, RoleViewer)
	if err != nil || inRoot.ID == p.ID || inRoot.TenantID != f.root.ID {
		t.Fatalf("root sign-in %+v %v", inRoot, err)
	}
}

func TestSignInRefusals(t *testing.T) {
	t.Parallel()
	f, ctx := newFixture(t), t.Context()
	_, err := f.signIn(t, ctx, strings.Repeat("s", MaxSubjectLen+1), "", uuid.Nil, RoleViewer)
	wantCode(t, err, connect.CodePermissionDenied)
	_, err = f.signIn(t, ctx, "user-1", "", uuid.Nil, RoleOwner)
	wantCode(t, err, connect.CodePermissionDenied)
	if _, err := db.New(f.pool).SetTenantSuspended(ctx, db.SetTenantSuspendedParams{ID: f.child.ID, Suspended: true}); err != nil {
		t.Fatal(err)
	}
	_, err = f.signIn(t, ctx, "user-1", "", f.child.ID, RoleViewer)
	wantCode(t, err, connect.CodePermissionDenied)
	// Nothing was created by the refusals.
	var n int
	if err := f.pool.QueryRow(ctx, "SELECT count(*) FROM principal_identities").Scan(&n); err != nil || n != 0 {
		t.Fatalf("identities %d %v, want none", n, err)
	}
	// A subject of exactly the bound makes a name cut to principals.name's bound.
	p, err := f.signIn(t, ctx, strings.Repeat("é", MaxSubjectLen), "", uuid.Nil, RoleViewer)
	if err != nil || len(p.Name) > maxPrincipalName {
		t.Fatalf("long subject: %+v %v", p, err)
	}
}

func TestSignInRespectsPrincipalCap(t *testing.T) {
	t.Parallel()
	f, ctx := newFixture(t), t.Context()
	capped := quota.WithLimits(ctx, quota.Limits{Principals: 1})
	if _, err := f.signIn(t, capped, "user-1", "", f.child.ID, RoleViewer); err != nil {
		t.Fatal(err)
	}
	_, err := f.signIn(t, capped, "user-2", "", f.child.ID, RoleViewer)
	wantCode(t, err, connect.CodeResourceExhausted)
	if !strings.Contains(err.Error(), quota.Principals.Key()) {
		t.Fatalf("error %v, want it to name %s", err, quota.Principals.Key())
	}
	// The principal already there signs in again.
	if _, err := f.signIn(t, capped, "user-1", "", f.child.ID, RoleViewer); err != nil {
		t.Fatal(err)
	}
}

func TestSignInConcurrentFirstSignIns(t *testing.T) {
	t.Parallel()
	f, ctx := newFixture(t), t.Context()
	ids := make(chan uuid.UUID, 4)
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			p, err := f.signIn(t, ctx, "racer", "", uuid.Nil, RoleViewer)
			if err != nil {
				errs <- err
				return
			}
			ids <- p.ID
		}()
	}
	var first uuid.UUID
	for range 4 {
		select {
		case err := <-errs:
			t.Fatal(err)
		case id := <-ids:
			if first == uuid.Nil {
				first = id
			} else if id != first {
				t.Fatalf("principals %s and %s for one subject", first, id)
			}
		}
	}
}

// session signs a principal in and starts a session of it.
func (f *fixture) session(t *testing.T, tenant uuid.UUID) (*Principal, Session) {
	t.Helper()
	ctx := t.Context()
	p, err := f.signIn(t, ctx, "user-"+uuid.NewString(), "", tenant, RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	s, err := StartSession(ctx, f.pool, SessionLifetimes{}, SessionParams{TenantID: p.TenantID, PrincipalID: p.ID, AuthMethodID: &f.method.ID, Kind: SessionBrowser})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s.Token, SessionPrefix) || time.Until(s.ExpiresAt) < DefaultSessionAbsolute-time.Minute {
		t.Fatalf("session %+v", s)
	}
	return p, s
}

func bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

func TestSessionAuthenticatesByBearerAndCookie(t *testing.T) {
	t.Parallel()
	f, ctx := newFixture(t), t.Context()
	e := NewEmbedded(f.pool, nil)
	p, s := f.session(t, uuid.Nil)
	got, err := e.Authenticate(ctx, bearer(s.Token))
	if err != nil || got.ID != p.ID || got.SessionID != s.ID || got.KeyID != "" || !slices.Equal(got.Roles, []Role{RoleViewer}) {
		t.Fatalf("bearer: %+v %v", got, err)
	}
	cookie := http.Header{"Cookie": {SessionCookie + "=" + s.Token}}
	// The cookie alone is no credential: the X-Better-Compute header is the CSRF guard.
	if got, err := e.Authenticate(ctx, cookie); got != nil || err != nil {
		t.Fatalf("cookie without the header: %+v %v, want no credential", got, err)
	}
	cookie.Set("X-Better-Compute", "1")
	if got, err := e.Authenticate(ctx, cookie); err != nil || got.ID != p.ID || got.SessionID != s.ID {
		t.Fatalf("cookie with the header: %+v %v", got, err)
	}
	// A wrong secret, a malformed token and an unknown id are refused alike.
	wrong := s.Token[:len(s.Token)-1] + "a"
	if wrong == s.Token {
		wrong = s.Token[:len(s.Token)-1] + "b"
	}
	for _, tok := range []string{wrong, "bcs_nope", NewSessionToken().String()} {
		_, err := e.Authenticate(ctx, bearer(tok))
		wantCode(t, err, connect.CodeUnauthenticated)
	}
	// API keys keep working beside sessions: a bad one is still an API key error.
	_, err = e.Authenticate(ctx, bearer(NewKey().String()))
	wantCode(t, err, connect.CodeUnauthenticated)
}

func TestSessionEnds(t *testing.T) {
	t.Parallel()
	f, ctx := newFixture(t), t.Context()
	e := NewEmbedded(f.pool, nil).WithSessionLifetimes(SessionLifetimes{Idle: time.Hour, Absolute: 2 * time.Hour})

	t.Run("idle", func(t *testing.T) {
		t.Parallel()
		_, s := f.session(t, uuid.Nil)
		idle := *e
		idle.now = func() time.Time { return time.Now().Add(time.Hour + time.Minute) }
		_, err := idle.Authenticate(ctx, bearer(s.Token))
		wantCode(t, err, connect.CodeUnauthenticated)
		if !strings.Contains(err.Error(), "without use") {
			t.Fatalf("error %v, want the idle timeout", err)
		}
	})
	t.Run("absolute", func(t *testing.T) {
		t.Parallel()
		p, _ := f.session(t, uuid.Nil)
		s, err := StartSession(ctx, f.pool, SessionLifetimes{Absolute: 2 * time.Hour}, SessionParams{
			TenantID: p.TenantID, PrincipalID: p.ID, Kind: SessionCLI, ExpiresAt: time.Now().Add(24 * time.Hour),
		})
		if err != nil || time.Until(s.ExpiresAt) > 2*time.Hour {
			t.Fatalf("session %+v %v, want its end cut to the absolute lifetime", s, err)
		}
		// Used within every idle timeout, it still ends at its absolute end.
		if _, err := f.pool.Exec(ctx, "UPDATE sessions SET last_used_at = now() + interval '2 hours' WHERE id = $1", s.ID); err != nil {
			t.Fatal(err)
		}
		late := *e
		late.now = func() time.Time { return time.Now().Add(2*time.Hour + time.Minute) }
		_, err = late.Authenticate(ctx, bearer(s.Token))
		wantCode(t, err, connect.CodeUnauthenticated)
		if !strings.Contains(err.Error(), "expired") {
			t.Fatalf("error %v, want the absolute end", err)
		}
	})
	t.Run("revoked", func(t *testing.T) {
		t.Parallel()
		p, s := f.session(t, uuid.Nil)
		n, err := db.New(f.pool).RevokeSession(ctx, db.RevokeSessionParams{TenantID: p.TenantID, ID: s.ID})
		if err != nil || n != 1 {
			t.Fatalf("revoke: %d %v", n, err)
		}
		_, err = e.Authenticate(ctx, bearer(s.Token))
		wantCode(t, err, connect.CodeUnauthenticated)
	})
	t.Run("suspended tenant", func(t *testing.T) {
		t.Parallel()
		other, err := db.New(f.pool).CreateTenant(ctx, db.CreateTenantParams{ID: uuid.Must(uuid.NewV7()), ParentID: &f.root.ID, Name: "suspended"})
		if err != nil {
			t.Fatal(err)
		}
		_, s := f.session(t, other.ID)
		if _, err := db.New(f.pool).SetTenantSuspended(ctx, db.SetTenantSuspendedParams{ID: other.ID, Suspended: true}); err != nil {
			t.Fatal(err)
		}
		_, err = e.Authenticate(ctx, bearer(s.Token))
		wantCode(t, err, connect.CodePermissionDenied)
	})
	t.Run("touched at most once a minute", func(t *testing.T) {
		t.Parallel()
		_, s := f.session(t, uuid.Nil)
		if _, err := f.pool.Exec(ctx, "UPDATE sessions SET last_used_at = now() - interval '10 minutes' WHERE id = $1", s.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Authenticate(ctx, bearer(s.Token)); err != nil {
			t.Fatal(err)
		}
		var age time.Duration
		if err := f.pool.QueryRow(ctx, "SELECT extract(epoch FROM now() - last_used_at)::float8 * interval '1 second' FROM sessions WHERE id = $1", s.ID).Scan(&age); err != nil {
			t.Fatal(err)
		}
		if age > time.Minute {
			t.Fatalf("last used %s ago, want just now", age)
		}
	})
}
