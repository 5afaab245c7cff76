package server_test

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/server/servertest"
)

// wantDenied checks a PermissionDenied error that says why.
func wantDenied(t *testing.T, err error, why string) {
	t.Helper()
	wantCode(t, err, connect.CodePermissionDenied)
	if !strings.Contains(err.Error(), why) {
		t.Fatalf("error %q does not say %q", err, why)
	}
}

func whoAmI(t *testing.T, env *servertest.Env, key string) *iamv1.WhoAmIResponse {
	t.Helper()
	me, err := env.IAM(key).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return me
}

// TestOwnersKeysAndBindingsAreChangedByOwnersOnly is the filed fault: an admin deleted the owner's
// key and locked the tenant out. An admin of a child tenant can now neither revoke, mint nor
// rebind for an owner, nor grant owner; an owner can.
func TestOwnersKeysAndBindingsAreChangedByOwnersOnly(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	child, err := env.IAM(env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	ownerKey := child.GetOwnerApiKey()
	owner := env.IAM(ownerKey)
	me := whoAmI(t, env, ownerKey)
	ownerID, ownerKeyID := me.GetPrincipal().GetId(), me.GetApiKeyId()
	adminID, adminKey := newPrincipal(t, env, ownerKey, "an-admin", iamv1.Role_ROLE_ADMIN)
	viewerID, _ := newPrincipal(t, env, ownerKey, "a-viewer", iamv1.Role_ROLE_VIEWER)
	admin := env.IAM(adminKey)

	_, err = admin.DeleteApiKey(ctx, &iamv1.DeleteApiKeyRequest{Id: ownerKeyID})
	wantDenied(t, err, "only owners may revoke the API keys of an owner")
	_, err = admin.CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: ownerID})
	wantDenied(t, err, "only owners may create API keys for an owner")
	_, err = admin.CreateRoleBinding(ctx, &iamv1.CreateRoleBindingRequest{PrincipalId: viewerID, Role: iamv1.Role_ROLE_OWNER})
	wantDenied(t, err, "only owners may grant the owner role")
	_, err = admin.CreateRoleBinding(ctx, &iamv1.CreateRoleBindingRequest{PrincipalId: adminID, Role: iamv1.Role_ROLE_OWNER})
	wantDenied(t, err, "only owners may grant the owner role")
	_, err = admin.CreateRoleBinding(ctx, &iamv1.CreateRoleBindingRequest{PrincipalId: ownerID, Role: iamv1.Role_ROLE_VIEWER})
	wantDenied(t, err, "only owners may change the role bindings of an owner")
	// The owner also holds viewer; an admin cannot take that away either, nor the owner itself.
	vb, err := owner.CreateRoleBinding(ctx, &iamv1.CreateRoleBindingRequest{PrincipalId: ownerID, Role: iamv1.Role_ROLE_VIEWER})
	if err != nil {
		t.Fatal(err)
	}
	_, err = admin.DeleteRoleBinding(ctx, &iamv1.DeleteRoleBindingRequest{Id: vb.GetRoleBinding().GetId()})
	wantDenied(t, err, "only owners may change the role bindings of an owner")
	_, err = admin.DeletePrincipal(ctx, &iamv1.DeletePrincipalRequest{Id: ownerID})
	wantDenied(t, err, "only owners may remove an owner")
	// The owner is not locked out.
	if got := whoAmI(t, env, ownerKey); got.GetPrincipal().GetId() != ownerID {
		t.Fatalf("owner's key now acts as %v", got.GetPrincipal())
	}
	// Admins still manage non-owners.
	if _, err := admin.CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: viewerID}); err != nil {
		t.Fatalf("admin mints a viewer's key: %v", err)
	}
	// An owner does all of it.
	k, err := owner.CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: ownerID, Name: "second"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := owner.DeleteApiKey(ctx, &iamv1.DeleteApiKeyRequest{Id: k.GetApiKey().GetId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.DeleteRoleBinding(ctx, &iamv1.DeleteRoleBindingRequest{Id: vb.GetRoleBinding().GetId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.CreateRoleBinding(ctx, &iamv1.CreateRoleBindingRequest{PrincipalId: adminID, Role: iamv1.Role_ROLE_OWNER}); err != nil {
		t.Fatal(err)
	}
	// The new owner is protected from the remaining admins in turn, and can act as owner.
	_, otherAdminKey := newPrincipal(t, env, ownerKey, "other-admin", iamv1.Role_ROLE_ADMIN)
	_, err = env.IAM(otherAdminKey).CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: adminID})
	wantDenied(t, err, "only owners may create API keys for an owner")
	// Refusals are audited as such.
	var denied int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM audit_events WHERE tenant_id = $1 AND outcome = 'permission_denied'`,
		child.GetTenant().GetId()).Scan(&denied); err != nil || denied != 8 {
		t.Errorf("%d permission_denied audit rows (%v), want 8", denied, err)
	}
}

// TestPromotionRevokesKeysANonOwnerMinted: a key an admin minted for a principal stops working
// when the principal is made owner, so no key a non-owner held becomes an owner's; keys an owner
// minted keep working.
func TestPromotionRevokesKeysANonOwnerMinted(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	_, adminKey := newPrincipal(t, env, env.AdminKey, "an-admin", iamv1.Role_ROLE_ADMIN)
	adminID := whoAmI(t, env, adminKey).GetPrincipal().GetId()
	vID, _ := newPrincipal(t, env, env.AdminKey, "promoted", iamv1.Role_ROLE_VIEWER)
	byAdmin, err := env.IAM(adminKey).CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: vID, Name: "by-admin"})
	if err != nil {
		t.Fatal(err)
	}
	if k := byAdmin.GetApiKey(); k.GetCreatedByOwner() || k.GetCreatorPrincipalId() != adminID {
		t.Errorf("key minted by the admin: created_by_owner %v, creator %q (want %s)", k.GetCreatedByOwner(), k.GetCreatorPrincipalId(), adminID)
	}
	byOwner, err := env.IAM(env.AdminKey).CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: vID, Name: "by-owner"})
	if err != nil {
		t.Fatal(err)
	}
	if !byOwner.GetApiKey().GetCreatedByOwner() {
		t.Error("key minted by the owner is not marked so")
	}
	whoAmI(t, env, byAdmin.GetKey())

	res, err := env.IAM(env.AdminKey).CreateRoleBinding(ctx, &iamv1.CreateRoleBindingRequest{PrincipalId: vID, Role: iamv1.Role_ROLE_OWNER})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.GetRevokedApiKeyIds(); !slices.Equal(got, []string{byAdmin.GetApiKey().GetId()}) {
		t.Errorf("revoked keys %v, want the admin's %s", got, byAdmin.GetApiKey().GetId())
	}
	_, err = env.IAM(byAdmin.GetKey()).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	wantCode(t, err, connect.CodeUnauthenticated)
	if roles := whoAmI(t, env, byOwner.GetKey()).GetRoles(); !slices.Contains(roles, iamv1.Role_ROLE_OWNER) {
		t.Errorf("owner-minted key acts with roles %v", roles)
	}
}

// TestPromotionRacesKeyMinting runs an admin minting keys for a principal against an owner
// promoting it: whichever commits first, no key a non-owner minted works once it is owner.
func TestPromotionRacesKeyMinting(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	_, adminKey := newPrincipal(t, env, env.AdminKey, "an-admin", iamv1.Role_ROLE_ADMIN)
	for i := range 6 {
		id, _ := newPrincipal(t, env, env.AdminKey, "racer-"+string(rune('a'+i)), iamv1.Role_ROLE_VIEWER)
		var wg sync.WaitGroup
		var minted []string
		var mu sync.Mutex
		for range 3 {
			wg.Go(func() {
				k, err := env.IAM(adminKey).CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: id})
				if err == nil {
					mu.Lock()
					minted = append(minted, k.GetKey())
					mu.Unlock()
				} else if connect.CodeOf(err) != connect.CodePermissionDenied {
					t.Errorf("mint: %v", err)
				}
			})
		}
		wg.Go(func() {
			if _, err := env.IAM(env.AdminKey).CreateRoleBinding(ctx, &iamv1.CreateRoleBindingRequest{PrincipalId: id, Role: iamv1.Role_ROLE_OWNER}); err != nil {
				t.Errorf("promote: %v", err)
			}
		})
		wg.Wait()
		for _, k := range minted {
			if _, err := env.IAM(k).WhoAmI(ctx, &iamv1.WhoAmIRequest{}); connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Errorf("round %d: an admin-minted key of the new owner answers %v", i, err)
			}
		}
	}
}

// TestLastOwnerAndLastOwnerKey: a tenant keeps an owner, and an owner with a usable key.
func TestLastOwnerAndLastOwnerKey(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	child, err := env.IAM(env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	owner := env.IAM(child.GetOwnerApiKey())
	me := whoAmI(t, env, child.GetOwnerApiKey())
	ownerID := me.GetPrincipal().GetId()

	_, err = owner.DeleteApiKey(ctx, &iamv1.DeleteApiKeyRequest{Id: me.GetApiKeyId()})
	wantCode(t, err, connect.CodeFailedPrecondition)
	_, err = owner.DeletePrincipal(ctx, &iamv1.DeletePrincipalRequest{Id: ownerID})
	wantCode(t, err, connect.CodeFailedPrecondition)
	// A second owner without a key does not make the first removable.
	secondID, _ := newPrincipal(t, env, child.GetOwnerApiKey(), "second", iamv1.Role_ROLE_OWNER)
	keys, err := owner.ListApiKeys(ctx, &iamv1.ListApiKeysRequest{PrincipalId: secondID})
	if err != nil || len(keys.GetApiKeys()) != 1 {
		t.Fatalf("second owner's keys %v, %v", keys.GetApiKeys(), err)
	}
	second := keys.GetApiKeys()[0].GetId()
	if _, err := owner.DeleteApiKey(ctx, &iamv1.DeleteApiKeyRequest{Id: second}); err != nil {
		t.Fatal(err)
	}
	_, err = owner.DeletePrincipal(ctx, &iamv1.DeletePrincipalRequest{Id: ownerID})
	wantCode(t, err, connect.CodeFailedPrecondition)
	// Rotation works: a new key first, then the old one goes.
	k, err := owner.CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: ownerID})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := owner.DeleteApiKey(ctx, &iamv1.DeleteApiKeyRequest{Id: me.GetApiKeyId()}); err != nil {
		t.Fatal(err)
	}
	whoAmI(t, env, k.GetKey())
}
