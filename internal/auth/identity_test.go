package auth

import (
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/queries"
)

// newMethod adds an auth method of tenant named name with issuer.
func (f *fixture) newMethod(t *testing.T, tenant uuid.UUID, name, issuer string) SignInMethod {
	t.Helper()
	m, err := db.New(f.pool).CreateAuthMethod(t.Context(), db.CreateAuthMethodParams{
		ID: uuid.Must(uuid.NewV7()), TenantID: tenant, Name: name, Kind: "jwt", Issuer: issuer,
		ClientSecretSealed: []byte{}, Scopes: []string{}, RedirectUris: []string{}, Audiences: []string{"bc"},
		ClaimPaths: []byte("{}"), Rules: []byte("[]"),
	})
	if err != nil {
		t.Fatal(err)
	}
	return SignInMethod{ID: m.ID, TenantID: tenant, Name: name}
}

// TestSignInThroughAnotherMethodMakesItsOwnPrincipal: an identity belongs to the method that
// made it (issue 31). Another method naming the same issuer and subject, as an admin's JWT
// method with keys of its own would, signs in as a principal of its own; a method made again
// under a deleted one's name does too.
func TestSignInThroughAnotherMethodMakesItsOwnPrincipal(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFixture(t)
	owner, err := f.signIn(t, ctx, "alice", "", f.root.ID, RoleViewer)
	if err != nil {
		t.Fatal(err)
	}
	evil := f.newMethod(t, f.root.ID, "evil", "https://idp.example.com")
	p, err := SignIn(ctx, f.pool, SignInParams{Method: evil, Issuer: "https://idp.example.com", Subject: "alice", Roles: []Role{RoleViewer}})
	if err != nil {
		t.Fatal(err)
	}
	if p.ID == owner.ID {
		t.Fatal("a sign-in through another method of the same issuer found the first method's principal")
	}
	again, err := f.signIn(t, ctx, "alice", "", f.root.ID, RoleViewer)
	if err != nil || again.ID != owner.ID {
		t.Fatalf("the first method's sign-in: %v %v, want principal %s", again, err, owner.ID)
	}

	// Deleted and made again (twice, so both usual names are taken), the method makes new
	// principals.
	seen := map[uuid.UUID]bool{owner.ID: true, p.ID: true}
	for range 2 {
		if _, err := f.pool.Exec(ctx, "DELETE FROM auth_methods WHERE id = $1", f.method.ID); err != nil {
			t.Fatal(err)
		}
		f.method = f.newMethod(t, f.root.ID, "okta", "https://idp.example.com")
		p, err := f.signIn(t, ctx, "alice", "", f.root.ID, RoleViewer)
		if err != nil {
			t.Fatal(err)
		}
		if seen[p.ID] {
			t.Fatalf("the method made again signed in as principal %s (%s), which another method made", p.ID, p.Name)
		}
		seen[p.ID] = true
	}
}

// TestIdentityBackfill runs migration 0031's backfill: each identity is bound to the oldest
// method of its issuer, of its tenant or a tenant above it, not the last one it signed in
// through; none: unbound.
func TestIdentityBackfill(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	f := newFixture(t)
	later := f.newMethod(t, f.root.ID, "later", "https://idp.example.com")
	other := f.newMethod(t, f.child.ID, "other", "https://other.example.com")
	q := db.New(f.pool)
	identity := func(tenant uuid.UUID, subject, issuer string, method *uuid.UUID) uuid.UUID {
		t.Helper()
		p, err := q.CreatePrincipal(ctx, db.CreatePrincipalParams{ID: uuid.Must(uuid.NewV7()), TenantID: tenant, Kind: "user", Name: "u-" + subject})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.pool.Exec(ctx, `INSERT INTO principal_identities (principal_id, tenant_id, issuer, subject, auth_method_id)
			VALUES ($1, $2, $3, $4, $5)`, p.ID, tenant, issuer, subject, method); err != nil {
			t.Fatal(err)
		}
		return p.ID
	}
	want := map[uuid.UUID]*uuid.UUID{
		// Last signed in through a newer method of the issuer: back to the oldest.
		identity(f.root.ID, "a", "https://idp.example.com", &later.ID): &f.method.ID,
		// In the child, through the root's methods: the root's oldest.
		identity(f.child.ID, "b", "https://idp.example.com", nil): &f.method.ID,
		// The child's own method.
		identity(f.child.ID, "c", "https://other.example.com", nil): &other.ID,
		// No method has its issuer (a JWT method without one linked it): unbound.
		identity(f.root.ID, "d", "https://gone.example.com", &f.method.ID): nil,
		// The child's issuer is not the root's.
		identity(f.root.ID, "e", "https://other.example.com", nil): nil,
	}
	sql, err := queries.Migrations.ReadFile("migrations/0031_identity_method.sql")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(sql), "UPDATE principal_identities")
	end := strings.Index(string(sql)[start:], ";\n")
	if start < 0 || end < 0 {
		t.Fatal("no backfill in migration 0031")
	}
	if _, err := f.pool.Exec(ctx, string(sql)[start:start+end]); err != nil {
		t.Fatal(err)
	}
	for principal, method := range want {
		var got *uuid.UUID
		if err := f.pool.QueryRow(ctx, "SELECT auth_method_id FROM principal_identities WHERE principal_id = $1", principal).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if (got == nil) != (method == nil) || (got != nil && *got != *method) {
			t.Errorf("principal %s: bound to %v, want %v", principal, got, method)
		}
	}
}
