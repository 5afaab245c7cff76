package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	auditv1 "github.com/better-compute/better-compute/gen/go/bettercompute/audit/v1"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/server/servertest"
)

var ctx = context.Background()

func wantCode(t *testing.T, err error, code connect.Code) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Fatalf("error = %v, want code %v", err, code)
	}
}

// newPrincipal creates a service account with role in the tenant of ownerKey and returns a
// key for it.
func newPrincipal(t *testing.T, env *servertest.Env, ownerKey, name string, role iamv1.Role) (id, key string) {
	t.Helper()
	c := env.IAM(ownerKey)
	p, err := c.CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_SERVICE_ACCOUNT, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	id = p.GetPrincipal().GetId()
	if role != iamv1.Role_ROLE_UNSPECIFIED {
		if _, err := c.CreateRoleBinding(ctx, &iamv1.CreateRoleBindingRequest{PrincipalId: id, Role: role}); err != nil {
			t.Fatal(err)
		}
	}
	k, err := c.CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: id})
	if err != nil {
		t.Fatal(err)
	}
	return id, k.GetKey()
}

func postJSON(t *testing.T, url string, header map[string]string, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func TestProtectedMethodRefusals(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	route := env.URL + "/iam/whoAmI"
	auth := "Bearer " + env.AdminKey

	if code, body := postJSON(t, route, map[string]string{"Authorization": auth}, `{}`); code != http.StatusBadRequest || !strings.Contains(body, "X-Better-Compute") {
		t.Errorf("without the header: %d %s", code, body)
	}
	if code, body := postJSON(t, route, map[string]string{"X-Better-Compute": "1"}, `{}`); code != http.StatusUnauthorized || !strings.Contains(body, "unauthenticated") {
		t.Errorf("without a key: %d %s", code, body)
	}
	if code, body := postJSON(t, route, map[string]string{"X-Better-Compute": "1", "Authorization": "Bearer nonsense"}, `{}`); code != http.StatusUnauthorized {
		t.Errorf("malformed key: %d %s", code, body)
	}
	if code, body := postJSON(t, route, map[string]string{"X-Better-Compute": "1", "Authorization": auth}, `{}`); code != http.StatusOK {
		t.Errorf("with header and key: %d %s", code, body)
	}

	admin := env.IAM(env.AdminKey)
	me, err := admin.WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// An expired key.
	k, err := admin.CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: me.GetPrincipal().GetId(), ExpireTime: timestamppb.New(time.Now().Add(time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Pool.Exec(ctx, "UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1", k.GetApiKey().GetId()); err != nil {
		t.Fatal(err)
	}
	_, err = env.IAM(k.GetKey()).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	wantCode(t, err, connect.CodeUnauthenticated)
	if !strings.Contains(err.Error(), "expired") {
		t.Errorf("expired key error = %v", err)
	}
	// A deleted key.
	k, err = admin.CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: me.GetPrincipal().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.IAM(k.GetKey()).WhoAmI(ctx, &iamv1.WhoAmIRequest{}); err != nil {
		t.Fatalf("fresh key: %v", err)
	}
	if _, err := admin.DeleteApiKey(ctx, &iamv1.DeleteApiKeyRequest{Id: k.GetApiKey().GetId()}); err != nil {
		t.Fatal(err)
	}
	_, err = env.IAM(k.GetKey()).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	wantCode(t, err, connect.CodeUnauthenticated)
	// A key with the right id and a wrong secret.
	forged := k.GetKey()[:len(k.GetKey())-1] + "a"
	if forged == k.GetKey() {
		forged = k.GetKey()[:len(k.GetKey())-1] + "b"
	}
	_, err = env.IAM(forged).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	wantCode(t, err, connect.CodeUnauthenticated)
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	root := env.IAM(env.AdminKey)
	a, err := root.CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := root.CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "globex"})
	if err != nil {
		t.Fatal(err)
	}
	acme, globex := env.IAM(a.GetOwnerApiKey()), env.IAM(b.GetOwnerApiKey())
	bob, err := globex.CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_USER, Name: "bob", Email: "bob@globex.example"})
	if err != nil {
		t.Fatal(err)
	}
	bobID := bob.GetPrincipal().GetId()

	_, err = acme.GetPrincipal(ctx, &iamv1.GetPrincipalRequest{Id: bobID})
	wantCode(t, err, connect.CodeNotFound)
	_, err = acme.DeletePrincipal(ctx, &iamv1.DeletePrincipalRequest{Id: bobID})
	wantCode(t, err, connect.CodeNotFound)
	_, err = acme.CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: bobID})
	wantCode(t, err, connect.CodeNotFound)
	_, err = acme.CreateRoleBinding(ctx, &iamv1.CreateRoleBindingRequest{PrincipalId: bobID, Role: iamv1.Role_ROLE_ADMIN})
	wantCode(t, err, connect.CodeNotFound)
	_, err = acme.GetTenant(ctx, &iamv1.GetTenantRequest{Id: b.GetTenant().GetId()})
	wantCode(t, err, connect.CodeNotFound)
	list, err := acme.ListPrincipals(ctx, &iamv1.ListPrincipalsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range list.GetPrincipals() {
		if p.GetTenantId() != a.GetTenant().GetId() {
			t.Errorf("acme lists principal %s of tenant %s", p.GetName(), p.GetTenantId())
		}
	}
	// A child tenant's owner may not create tenants: only the root tenant may.
	_, err = acme.CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "acme-sub"})
	wantCode(t, err, connect.CodePermissionDenied)
	// The root tenant sees its children.
	tenants, err := root.ListTenants(ctx, &iamv1.ListTenantsRequest{})
	if err != nil || len(tenants.GetTenants()) != 3 {
		t.Fatalf("root lists %d tenants (%v), want root, acme, globex", len(tenants.GetTenants()), err)
	}
	// And audit logs are per tenant too.
	events, err := env.Audit(a.GetOwnerApiKey()).List(ctx, &auditv1.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.GetEvents() {
		if e.GetTenantId() != a.GetTenant().GetId() {
			t.Errorf("acme sees audit event %v", e)
		}
	}
}

func TestRoleDecisions(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	_, viewer := newPrincipal(t, env, env.AdminKey, "viewer", iamv1.Role_ROLE_VIEWER)
	_, operator := newPrincipal(t, env, env.AdminKey, "operator", iamv1.Role_ROLE_OPERATOR)
	adminID, admin := newPrincipal(t, env, env.AdminKey, "an-admin", iamv1.Role_ROLE_ADMIN)
	_, nobody := newPrincipal(t, env, env.AdminKey, "nobody", iamv1.Role_ROLE_UNSPECIFIED)

	create := func(key, name string) error {
		_, err := env.IAM(key).CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_SERVICE_ACCOUNT, Name: name})
		return err
	}
	list := func(key string) error {
		_, err := env.IAM(key).ListPrincipals(ctx, &iamv1.ListPrincipalsRequest{})
		return err
	}
	audit := func(key string) error {
		_, err := env.Audit(key).List(ctx, &auditv1.ListRequest{})
		return err
	}
	grantOwner := func(key string) error {
		_, err := env.IAM(key).CreateRoleBinding(ctx, &iamv1.CreateRoleBindingRequest{PrincipalId: adminID, Role: iamv1.Role_ROLE_OWNER})
		return err
	}
	whoAmI := func(key string) error {
		_, err := env.IAM(key).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
		return err
	}
	for _, c := range []struct {
		who, key, action string
		do               func(string) error
		want             connect.Code
	}{
		{"nobody", nobody, "whoAmI", whoAmI, connect.CodePermissionDenied},
		{"viewer", viewer, "whoAmI", whoAmI, 0},
		{"viewer", viewer, "list", list, 0},
		{"viewer", viewer, "audit", audit, 0},
		{"viewer", viewer, "create", func(k string) error { return create(k, "v1") }, connect.CodePermissionDenied},
		{"operator", operator, "list", list, 0},
		{"operator", operator, "create", func(k string) error { return create(k, "o1") }, connect.CodePermissionDenied},
		{"admin", admin, "create", func(k string) error { return create(k, "a1") }, 0},
		{"admin", admin, "grant owner", grantOwner, connect.CodePermissionDenied},
		{"owner", env.AdminKey, "grant owner", grantOwner, 0},
	} {
		err := c.do(c.key)
		if connect.CodeOf(err) != c.want && !(c.want == 0 && err == nil) {
			t.Errorf("%s %s: %v, want %v", c.who, c.action, err, c.want)
		}
	}
	// The last owner cannot be removed, even by an owner.
	ownerList, err := env.IAM(env.AdminKey).ListRoleBindings(ctx, &iamv1.ListRoleBindingsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var owners []string
	for _, b := range ownerList.GetRoleBindings() {
		if b.GetRole() == iamv1.Role_ROLE_OWNER {
			owners = append(owners, b.GetId())
		}
	}
	if len(owners) != 2 {
		t.Fatalf("%d owners, want 2", len(owners))
	}
	if _, err := env.IAM(env.AdminKey).DeleteRoleBinding(ctx, &iamv1.DeleteRoleBindingRequest{Id: owners[1]}); err != nil {
		t.Fatal(err)
	}
	_, err = env.IAM(env.AdminKey).DeleteRoleBinding(ctx, &iamv1.DeleteRoleBindingRequest{Id: owners[0]})
	wantCode(t, err, connect.CodeFailedPrecondition)
}

func TestBadInputNamesTheField(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := env.IAM(env.AdminKey)
	for _, tc := range []struct {
		field string
		call  func() error
	}{
		{"name", func() error {
			_, err := c.CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "Not A Slug"})
			return err
		}},
		{"kind", func() error {
			_, err := c.CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{Name: "x"})
			return err
		}},
		{"principal_id", func() error {
			_, err := c.CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: "not-a-uuid"})
			return err
		}},
		{"page_size", func() error {
			_, err := c.ListPrincipals(ctx, &iamv1.ListPrincipalsRequest{PageSize: -1})
			return err
		}},
		{"page_token", func() error {
			_, err := c.ListPrincipals(ctx, &iamv1.ListPrincipalsRequest{PageToken: "%%%"})
			return err
		}},
	} {
		err := tc.call()
		wantCode(t, err, connect.CodeInvalidArgument)
		if !strings.Contains(err.Error(), tc.field) {
			t.Errorf("error %q does not name %s", err, tc.field)
		}
	}
	// Nothing was created by the refused calls.
	list, err := c.ListPrincipals(ctx, &iamv1.ListPrincipalsRequest{})
	if err != nil || len(list.GetPrincipals()) != 1 {
		t.Fatalf("principals after refused calls: %v, %v", list.GetPrincipals(), err)
	}
}

func TestIdempotency(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := env.IAM(env.AdminKey)
	call := func(key, name string) (*iamv1.CreatePrincipalResponse, error) {
		return c.CreatePrincipal(withIdempotencyKey(key), &iamv1.CreatePrincipalRequest{Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_SERVICE_ACCOUNT, Name: name})
	}
	first, err := call("k-1", "ci-bot")
	if err != nil {
		t.Fatal(err)
	}
	again, err := call("k-1", "ci-bot")
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if !proto.Equal(first, again) {
		t.Errorf("retry answered %v, want the stored %v", again, first)
	}
	_, err = call("k-1", "other-bot")
	wantCode(t, err, connect.CodeFailedPrecondition)

	// Concurrent calls with one key act once.
	var wg sync.WaitGroup
	results := make([]*iamv1.CreatePrincipalResponse, 8)
	errs := make([]error, 8)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = call("k-2", "racer") })
	}
	wg.Wait()
	for i := range results {
		if errs[i] != nil {
			t.Fatalf("concurrent call %d: %v", i, errs[i])
		}
		if !proto.Equal(results[i], results[0]) {
			t.Errorf("concurrent call %d answered %v, want %v", i, results[i], results[0])
		}
	}
	list, err := c.ListPrincipals(ctx, &iamv1.ListPrincipalsRequest{})
	if err != nil || len(list.GetPrincipals()) != 3 { // admin, ci-bot, racer
		t.Fatalf("principals: %d, %v; want 3", len(list.GetPrincipals()), err)
	}
	// A key sent to a method that is not idempotent is refused.
	_, err = c.DeletePrincipal(withIdempotencyKey("k-3"), &iamv1.DeletePrincipalRequest{Id: first.GetPrincipal().GetId()})
	wantCode(t, err, connect.CodeInvalidArgument)
	// Stored responses are sealed: a new API key is not in the table in the clear.
	k, err := callKey(env, "k-4")
	if err != nil {
		t.Fatal(err)
	}
	var leaked bool
	if err := env.Pool.QueryRow(ctx, "SELECT bool_or(position($1::bytea in response) > 0) FROM idempotency_keys", []byte(k)).Scan(&leaked); err != nil || leaked {
		t.Errorf("API key stored in the clear: %v %v", leaked, err)
	}
}

func callKey(env *servertest.Env, idem string) (string, error) {
	me, err := env.IAM(env.AdminKey).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	if err != nil {
		return "", err
	}
	res, err := env.IAM(env.AdminKey).CreateApiKey(withIdempotencyKey(idem), &iamv1.CreateApiKeyRequest{PrincipalId: me.GetPrincipal().GetId()})
	return res.GetKey(), err
}

func TestAuditEveryMutation(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := env.IAM(env.AdminKey)
	p, err := c.CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_USER, Name: "ann", Email: "ann@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	id := p.GetPrincipal().GetId()
	b, err := c.CreateRoleBinding(ctx, &iamv1.CreateRoleBindingRequest{PrincipalId: id, Role: iamv1.Role_ROLE_VIEWER})
	if err != nil {
		t.Fatal(err)
	}
	k, err := c.CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: id})
	if err != nil {
		t.Fatal(err)
	}
	// A refused mutation is audited too.
	_, err = env.IAM(k.GetKey()).CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_USER, Name: "eve"})
	wantCode(t, err, connect.CodePermissionDenied)
	if _, err := c.DeleteApiKey(ctx, &iamv1.DeleteApiKeyRequest{Id: k.GetApiKey().GetId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteRoleBinding(ctx, &iamv1.DeleteRoleBindingRequest{Id: b.GetRoleBinding().GetId()}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeletePrincipal(ctx, &iamv1.DeletePrincipalRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	// Reads are not audited.
	if _, err := c.ListPrincipals(ctx, &iamv1.ListPrincipalsRequest{}); err != nil {
		t.Fatal(err)
	}

	res, err := env.Audit(env.AdminKey).List(ctx, &auditv1.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range res.GetEvents() {
		got = append(got, fmt.Sprintf("%s %s %s", e.GetMethod(), e.GetOutcome(), strings.SplitN(e.GetTarget(), "/", 2)[0]))
		if e.GetRequestId() == "" {
			t.Errorf("event %d has no request id", e.GetId())
		}
	}
	want := []string{ // newest first
		"iam/deletePrincipal ok principal",
		"iam/deleteRoleBinding ok roleBinding",
		"iam/deleteApiKey ok apiKey",
		"iam/createPrincipal permission_denied ",
		"iam/createApiKey ok apiKey",
		"iam/createRoleBinding ok roleBinding",
		"iam/createPrincipal ok principal",
		"cli/mintAdminKey ok apiKey",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("audit log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Filters.
	res, err = env.Audit(env.AdminKey).List(ctx, &auditv1.ListRequest{Outcome: "permission_denied"})
	if err != nil || len(res.GetEvents()) != 1 || res.GetEvents()[0].GetPrincipalId() != id {
		t.Errorf("outcome filter: %v, %v", res.GetEvents(), err)
	}
}

// TestPaginationUnderConcurrentInserts pages through principals while another client inserts
// more: every principal that existed before paging began is seen exactly once.
func TestPaginationUnderConcurrentInserts(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := env.IAM(env.AdminKey)
	before := map[string]bool{}
	for i := range 60 {
		p, err := c.CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_SERVICE_ACCOUNT, Name: fmt.Sprintf("p%03d", i)})
		if err != nil {
			t.Fatal(err)
		}
		before[p.GetPrincipal().GetId()] = true
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := c.CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_SERVICE_ACCOUNT, Name: fmt.Sprintf("late%04d", i)}); err != nil {
				t.Error(err)
				return
			}
		}
	})
	seen := map[string]int{}
	token := ""
	for pages := 0; ; pages++ {
		res, err := c.ListPrincipals(ctx, &iamv1.ListPrincipalsRequest{PageSize: 7, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.GetPrincipals()) > 7 {
			t.Fatalf("page of %d, asked for 7", len(res.GetPrincipals()))
		}
		for _, p := range res.GetPrincipals() {
			seen[p.GetId()]++
		}
		if token = res.GetNextPageToken(); token == "" || pages > 1000 {
			break
		}
	}
	close(stop)
	wg.Wait()
	for id, n := range seen {
		if n != 1 {
			t.Errorf("principal %s seen %d times", id, n)
		}
	}
	for id := range before {
		if seen[id] != 1 {
			t.Errorf("principal %s that existed before paging was skipped", id)
		}
	}
	// The cap applies.
	res, err := c.ListPrincipals(ctx, &iamv1.ListPrincipalsRequest{PageSize: 100000})
	if err != nil || len(res.GetPrincipals()) > 500 {
		t.Fatalf("page size cap: %d, %v", len(res.GetPrincipals()), err)
	}
}

func TestErrorsAreConnectErrors(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	_, err := env.IAM(env.AdminKey).GetPrincipal(ctx, &iamv1.GetPrincipalRequest{Id: "0190a5a0-0000-7000-8000-000000000000"})
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeNotFound {
		t.Fatalf("GetPrincipal(unknown) = %v", err)
	}
}

// withIdempotencyKey returns a call context that sends an Idempotency-Key.
func withIdempotencyKey(key string) context.Context {
	cctx, ci := connect.NewClientContext(ctx)
	ci.RequestHeader().Set("Idempotency-Key", key)
	return cctx
}
