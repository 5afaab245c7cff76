package jointokens_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	auditv1 "github.com/better-compute/better-compute/gen/go/bettercompute/audit/v1"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	jointokensv1 "github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1/jointokensv1connect"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/guard"
	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

func client(env *servertest.Env, key string) jointokensv1connect.JoinTokensServiceClient {
	return jointokensv1connect.NewJoinTokensServiceClient(env.HTTPClient(key), env.URL)
}

func wantCode(t *testing.T, err error, code connect.Code) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Fatalf("error = %v, want code %v", err, code)
	}
}

func countTokens(t *testing.T, env *servertest.Env) int {
	t.Helper()
	var n int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM join_tokens`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCreateListRevoke(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)

	before := time.Now()
	res, err := c.Create(ctx, &jointokensv1.CreateRequest{
		Description: "rack 7", Pool: "gpu-a100", Labels: map[string]string{"zone": "eu-1", "example.com/tier": "gold"}, MaxUses: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	tok := res.GetToken()
	if !strings.HasPrefix(tok, "bcj_") {
		t.Fatalf("token %q does not start with bcj_", tok)
	}
	key, err := auth.ParseJoinToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	jt := res.GetJoinToken()
	if jt.GetId() != key.ID || jt.GetPool() != "gpu-a100" || jt.GetDescription() != "rack 7" || jt.GetMaxUses() != 3 ||
		jt.GetUses() != 0 || jt.GetExpired() || jt.GetRevoked() || jt.GetLabels()["example.com/tier"] != "gold" {
		t.Errorf("created %v", jt)
	}
	if d := jt.GetExpireTime().AsTime().Sub(before); d < 59*time.Minute || d > 61*time.Minute {
		t.Errorf("default expiry %v from now, want an hour", d)
	}

	// The database holds the hash of the secret, never the secret.
	var hash []byte
	var clear int
	if err := env.Pool.QueryRow(ctx, `SELECT secret_hash, (SELECT count(*) FROM join_tokens j WHERE row_to_json(j)::text LIKE '%' || $2 || '%')
		FROM join_tokens WHERE id = $1`, key.ID, key.Secret).Scan(&hash, &clear); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256([]byte(key.Secret)); !bytes.Equal(hash, sum[:]) {
		t.Error("secret_hash is not the SHA-256 of the secret")
	}
	if clear != 0 {
		t.Error("the secret is stored in the clear")
	}

	// Defaults: one use.
	one, err := c.Create(ctx, &jointokensv1.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if one.GetJoinToken().GetMaxUses() != 1 || len(one.GetJoinToken().GetLabels()) != 0 {
		t.Errorf("defaults: %v", one.GetJoinToken())
	}

	list, err := c.List(ctx, &jointokensv1.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetJoinTokens()) != 2 {
		t.Fatalf("listed %d tokens, want 2", len(list.GetJoinTokens()))
	}
	b, _ := protojson.Marshal(list)
	if bytes.Contains(b, []byte(key.Secret)) || bytes.Contains(b, []byte(tok)) {
		t.Error("list returns a secret")
	}
	for _, l := range list.GetJoinTokens() {
		if l.GetId() == key.ID && (l.GetMaxUses() != 3 || l.GetUses() != 0 || l.GetExpired() || l.GetRevoked()) {
			t.Errorf("listed %v", l)
		}
	}

	rev, err := c.Revoke(ctx, &jointokensv1.RevokeRequest{Id: key.ID})
	if err != nil {
		t.Fatal(err)
	}
	if !rev.GetJoinToken().GetRevoked() || rev.GetJoinToken().GetRevokeTime() == nil {
		t.Fatalf("revoked: %v", rev.GetJoinToken())
	}
	again, err := c.Revoke(ctx, &jointokensv1.RevokeRequest{Id: key.ID})
	if err != nil {
		t.Fatal(err)
	}
	if !again.GetJoinToken().GetRevokeTime().AsTime().Equal(rev.GetJoinToken().GetRevokeTime().AsTime()) {
		t.Error("a second revoke moved the revoke time")
	}
	list, err = c.List(ctx, &jointokensv1.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range list.GetJoinTokens() {
		if got := l.GetRevoked(); got != (l.GetId() == key.ID) {
			t.Errorf("token %s revoked = %v", l.GetId(), got)
		}
	}

	_, err = c.Revoke(ctx, &jointokensv1.RevokeRequest{Id: "nosuchtoken"})
	wantCode(t, err, connect.CodeNotFound)
	_, err = c.Revoke(ctx, &jointokensv1.RevokeRequest{})
	wantCode(t, err, connect.CodeInvalidArgument)

	// Creation and revocation are audited.
	for _, m := range []string{"joinTokens/create", "joinTokens/revoke"} {
		a, err := env.Audit(env.AdminKey).List(ctx, &auditv1.ListRequest{Method: m})
		if err != nil {
			t.Fatal(err)
		}
		ok := false
		for _, e := range a.GetEvents() {
			ok = ok || (e.GetOutcome() == "ok" && e.GetTarget() == "joinToken/"+key.ID)
		}
		if !ok {
			t.Errorf("no audit row for %s: %v", m, a.GetEvents())
		}
	}
}

func TestExpiredTokenIsShownExpired(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	who, err := env.IAM(env.AdminKey).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	if err != nil {
		t.Fatal(err)
	}
	key := auth.NewJoinToken()
	if _, err := db.New(env.Pool).CreateJoinToken(ctx, db.CreateJoinTokenParams{
		ID: key.ID, TenantID: uuid.MustParse(who.GetTenant().GetId()), Labels: []byte("{}"), SecretHash: key.Hash(),
		MaxUses: 1, ExpiresAt: time.Now().Add(-time.Minute),
	}); err != nil {
		t.Fatal(err)
	}
	list, err := client(env, env.AdminKey).List(ctx, &jointokensv1.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetJoinTokens()) != 1 || !list.GetJoinTokens()[0].GetExpired() {
		t.Errorf("listed %v, want one expired token", list.GetJoinTokens())
	}
}

func TestBadInputNamesTheFieldAndCreatesNothing(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	long := strings.Repeat("a", 64)
	now := time.Now()
	for _, tc := range []struct {
		name  string
		field string
		req   *jointokensv1.CreateRequest
	}{
		{"key too long", "labels", &jointokensv1.CreateRequest{Labels: map[string]string{long: "x"}}},
		{"key bad character", "labels", &jointokensv1.CreateRequest{Labels: map[string]string{"a b": "x"}}},
		{"key starts with dash", "labels", &jointokensv1.CreateRequest{Labels: map[string]string{"-a": "x"}}},
		{"empty key", "labels", &jointokensv1.CreateRequest{Labels: map[string]string{"": "x"}}},
		{"value too long", "labels", &jointokensv1.CreateRequest{Labels: map[string]string{"a": long}}},
		{"value with slash", "labels", &jointokensv1.CreateRequest{Labels: map[string]string{"a": "b/c"}}},
		{"negative max uses", "max_uses", &jointokensv1.CreateRequest{MaxUses: -1}},
		{"too many uses", "max_uses", &jointokensv1.CreateRequest{MaxUses: 10001}},
		{"expiry in the past", "expire_time", &jointokensv1.CreateRequest{ExpireTime: timestamppb.New(now.Add(-time.Second))}},
		{"expiry too far", "expire_time", &jointokensv1.CreateRequest{ExpireTime: timestamppb.New(now.Add(31 * 24 * time.Hour))}},
		{"invalid expiry", "expire_time", &jointokensv1.CreateRequest{ExpireTime: &timestamppb.Timestamp{Nanos: -1}}},
		{"bad pool", "pool", &jointokensv1.CreateRequest{Pool: "a b"}},
		{"long description", "description", &jointokensv1.CreateRequest{Description: strings.Repeat("x", 257)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := c.Create(ctx, tc.req)
			wantCode(t, err, connect.CodeInvalidArgument)
			var cerr *connect.Error
			if !errors.As(err, &cerr) || !strings.HasPrefix(cerr.Message(), tc.field+": ") {
				t.Errorf("message %q does not name %s", err, tc.field)
			}
		})
	}
	if n := countTokens(t, env); n != 0 {
		t.Errorf("%d tokens created by bad requests", n)
	}

	// The limits themselves are allowed.
	if _, err := c.Create(ctx, &jointokensv1.CreateRequest{
		MaxUses: 10000, ExpireTime: timestamppb.New(time.Now().Add(30*24*time.Hour - time.Minute)),
		Labels: map[string]string{strings.Repeat("k", 63): strings.Repeat("v", 63), "a": ""},
	}); err != nil {
		t.Fatal(err)
	}
}

func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	other, err := env.IAM(env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	mine, err := client(env, env.AdminKey).Create(ctx, &jointokensv1.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	c := client(env, other.GetOwnerApiKey())
	list, err := c.List(ctx, &jointokensv1.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.GetJoinTokens()) != 0 {
		t.Errorf("another tenant lists %v", list.GetJoinTokens())
	}
	_, err = c.Revoke(ctx, &jointokensv1.RevokeRequest{Id: mine.GetJoinToken().GetId()})
	wantCode(t, err, connect.CodeNotFound)
	theirs, err := c.Create(ctx, &jointokensv1.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if theirs.GetJoinToken().GetTenantId() != other.GetTenant().GetId() {
		t.Errorf("token made in tenant %s, want %s", theirs.GetJoinToken().GetTenantId(), other.GetTenant().GetId())
	}
}

func TestPermissions(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	iam := env.IAM(env.AdminKey)
	p, err := iam.CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_SERVICE_ACCOUNT, Name: "viewer"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := iam.CreateRoleBinding(ctx, &iamv1.CreateRoleBindingRequest{PrincipalId: p.GetPrincipal().GetId(), Role: iamv1.Role_ROLE_VIEWER}); err != nil {
		t.Fatal(err)
	}
	k, err := iam.CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: p.GetPrincipal().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	c := client(env, k.GetKey())
	if _, err := c.List(ctx, &jointokensv1.ListRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Create(ctx, &jointokensv1.CreateRequest{})
	wantCode(t, err, connect.CodePermissionDenied)
	_, err = c.Revoke(ctx, &jointokensv1.RevokeRequest{Id: "x"})
	wantCode(t, err, connect.CodePermissionDenied)
}

func TestIdempotentCreateReturnsTheSameToken(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	expiry := timestamppb.New(time.Now().Add(2 * time.Hour))
	create := func() *jointokensv1.CreateResponse {
		cctx, ci := connect.NewClientContext(ctx)
		ci.RequestHeader().Set(guard.IdempotencyKeyHeader, "create-once")
		res, err := c.Create(cctx, &jointokensv1.CreateRequest{Description: "once", ExpireTime: expiry})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	a, b := create(), create()
	if a.GetToken() == "" || a.GetToken() != b.GetToken() {
		t.Errorf("retry returned %q, first %q", b.GetToken(), a.GetToken())
	}
	if n := countTokens(t, env); n != 1 {
		t.Errorf("%d tokens after a retried create, want 1", n)
	}
	// The stored response is sealed: the token is not in the table in the clear.
	var leaked bool
	if err := env.Pool.QueryRow(ctx, "SELECT bool_or(position($1::bytea in response) > 0) FROM idempotency_keys", []byte(a.GetToken())).Scan(&leaked); err != nil || leaked {
		t.Errorf("join token stored in the clear: %v %v", leaked, err)
	}
}

func TestPagination(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	for range 5 {
		if _, err := c.Create(ctx, &jointokensv1.CreateRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	tok, pages := "", 0
	for {
		res, err := c.List(ctx, &jointokensv1.ListRequest{PageSize: 2, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, jt := range res.GetJoinTokens() {
			if seen[jt.GetId()] {
				t.Errorf("token %s on two pages", jt.GetId())
			}
			seen[jt.GetId()] = true
		}
		if tok = res.GetNextPageToken(); tok == "" {
			break
		}
	}
	if len(seen) != 5 || pages != 3 {
		t.Errorf("saw %d tokens on %d pages, want 5 on 3", len(seen), pages)
	}
	_, err := c.List(ctx, &jointokensv1.ListRequest{PageToken: "garbage!"})
	wantCode(t, err, connect.CodeInvalidArgument)
}

// TestCreateReturnsTheRootPin: joinTokens/create gives, beside the token, the root CA's pin
// that bcd join --ca-cert-hash checks the gateway against (empty before pki init), so a
// deployment made by the documented steps can take its first node without copying a file.
func TestCreateReturnsTheRootPin(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	res, err := c.Create(ctx, &jointokensv1.CreateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetCaCertHash() != "" {
		t.Errorf("before pki init: pin %q", res.GetCaCertHash())
	}
	bundle, err := pki.Init(ctx, env.Pool, "0123456789abcdef0123456789abcdef-test", "jointokens.test")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		res, err = c.Create(ctx, &jointokensv1.CreateRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := res.GetCaCertHash(), bundle.RootCertHash(); got != want || !strings.HasPrefix(got, "sha256:") {
			t.Errorf("pin %q, want the root's %q", got, want)
		}
	}
}
