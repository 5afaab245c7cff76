package secrets_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	auditv1 "github.com/better-compute/better-compute/gen/go/bettercompute/audit/v1"
	eventsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/events/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/events/v1/eventsv1connect"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	secretsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/secrets/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/secrets/v1/secretsv1connect"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/guard"
	"github.com/better-compute/better-compute/internal/seal"
	"github.com/better-compute/better-compute/internal/secret"
	"github.com/better-compute/better-compute/server/internal/secrets"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

func wantCode(t *testing.T, err error, code connect.Code) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Fatalf("error = %v, want code %v", err, code)
	}
}

func client(env *servertest.Env, key string) secretsv1connect.SecretsServiceClient {
	return secretsv1connect.NewSecretsServiceClient(env.HTTPClient(key), env.URL)
}

// stored opens the sealed value of a tenant's secret as the gateway would.
func stored(t *testing.T, env *servertest.Env, tenant, name string) []byte {
	t.Helper()
	var id uuid.UUID
	var sealed []byte
	if err := env.Pool.QueryRow(ctx, "SELECT id, value_sealed FROM secrets WHERE tenant_id = $1 AND name = $2", tenant, name).Scan(&id, &sealed); err != nil {
		t.Fatal(err)
	}
	s, err := secret.NewSealer(servertest.Secret)
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.Open(id, sealed)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// notInClear fails if any of the values appears in msg, as bytes, hex or base64.
func notInClear(t *testing.T, what string, msg []byte, values ...[]byte) {
	t.Helper()
	lower := bytes.ToLower(msg)
	for _, v := range values {
		for _, form := range [][]byte{v, []byte(hex.EncodeToString(v)), []byte(base64.StdEncoding.EncodeToString(v)), []byte(base64.RawURLEncoding.EncodeToString(v))} {
			if bytes.Contains(msg, form) || bytes.Contains(lower, bytes.ToLower(form)) {
				t.Fatalf("%s holds a secret value in the clear: %q", what, msg)
			}
		}
	}
}

// notInDatabase fails if any of the values appears in the clear in any row of any table.
func notInDatabase(t *testing.T, env *servertest.Env, values ...[]byte) {
	t.Helper()
	rows, err := env.Pool.Query(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'")
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) < 10 {
		t.Fatalf("tables %v", tables)
	}
	for _, table := range tables {
		rows, err := env.Pool.Query(ctx, "SELECT t::text FROM "+pgx.Identifier{table}.Sanitize()+" t")
		if err != nil {
			t.Fatal(err)
		}
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, row := range texts {
			notInClear(t, "table "+table, []byte(row), values...)
		}
	}
}

func TestCreateListUpdateDelete(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	value := []byte("hunter2-" + uuid.NewString())

	req := &secretsv1.CreateRequest{Name: "db/password", Value: value}
	cctx, ci := connect.NewClientContext(ctx)
	ci.RequestHeader().Set(guard.IdempotencyKeyHeader, "create-1")
	created, err := c.Create(cctx, req)
	if err != nil {
		t.Fatal(err)
	}
	sec := created.GetSecret()
	if sec.GetName() != "db/password" || sec.GetId() == "" || sec.GetTenantId() == "" || !sec.GetCreateTime().IsValid() {
		t.Fatalf("created %v", sec)
	}
	// A retry with the same key returns the same secret and creates nothing.
	cctx, ci = connect.NewClientContext(ctx)
	ci.RequestHeader().Set(guard.IdempotencyKeyHeader, "create-1")
	again, err := c.Create(cctx, req)
	if err != nil || !proto.Equal(again, created) {
		t.Fatalf("retry: %v %v", again, err)
	}
	// The same key with another value is refused, though only a digest of the value is kept.
	cctx, ci = connect.NewClientContext(ctx)
	ci.RequestHeader().Set(guard.IdempotencyKeyHeader, "create-1")
	_, err = c.Create(cctx, &secretsv1.CreateRequest{Name: "db/password", Value: []byte("other")})
	wantCode(t, err, connect.CodeFailedPrecondition)
	// Without a key, a second secret of the same name is refused.
	_, err = c.Create(ctx, &secretsv1.CreateRequest{Name: "db/password", Value: []byte("x")})
	wantCode(t, err, connect.CodeAlreadyExists)
	if got := stored(t, env, sec.GetTenantId(), "db/password"); !bytes.Equal(got, value) {
		t.Fatalf("stored value %q", got)
	}

	// The stored idempotent response is metadata only, and the request hash is not a plain hash
	// of the request (which would let a guess of the value be checked).
	var reqHash, response []byte
	if err := env.Pool.QueryRow(ctx, "SELECT request_hash, response FROM idempotency_keys WHERE key = 'create-1'").Scan(&reqHash, &response); err != nil {
		t.Fatal(err)
	}
	idem, err := seal.New(servertest.Secret, "idempotency")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := idem.Open(response, reqHash)
	if err != nil {
		t.Fatal(err)
	}
	notInClear(t, "the stored response", plain, value)
	var storedRes secretsv1.CreateResponse
	if err := proto.Unmarshal(plain, &storedRes); err != nil || !proto.Equal(&storedRes, created) {
		t.Fatalf("stored response %v (%v)", &storedRes, err)
	}
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	h := sha256.New()
	h.Write([]byte(secretsv1connect.SecretsServiceCreateProcedure))
	h.Write([]byte{0})
	h.Write(b)
	if bytes.Equal(h.Sum(nil), reqHash) {
		t.Fatal("the idempotency request hash is a plain hash of the value")
	}

	for _, n := range []string{"b", "a", "z.9"} {
		if _, err := c.Create(ctx, &secretsv1.CreateRequest{Name: n, Value: value}); err != nil {
			t.Fatal(err)
		}
	}
	// Pages of one, by name.
	var names []string
	tok := ""
	for {
		page, err := c.List(ctx, &secretsv1.ListRequest{PageSize: 1, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := proto.Marshal(page)
		notInClear(t, "secrets/list", raw, value)
		for _, s := range page.GetSecrets() {
			names = append(names, s.GetName())
		}
		if tok = page.GetNextPageToken(); tok == "" {
			break
		}
	}
	if strings.Join(names, ",") != "a,b,db/password,z.9" {
		t.Fatalf("listed %v", names)
	}
	// The JSON a caller sees carries no value either.
	hreq, _ := http.NewRequest(http.MethodPost, env.URL+"/secrets/list", strings.NewReader(`{}`))
	hreq.Header.Set("Content-Type", "application/json")
	hres, err := env.HTTPClient(env.AdminKey).Do(hreq)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(hres.Body)
	hres.Body.Close()
	if hres.StatusCode != http.StatusOK || !strings.Contains(string(body), `"db/password"`) {
		t.Fatalf("POST /secrets/list: %d %s", hres.StatusCode, body)
	}
	notInClear(t, "secrets/list as JSON", body, value)

	newValue := []byte("correct-horse-" + uuid.NewString())
	updated, err := c.Update(ctx, &secretsv1.UpdateRequest{Name: "db/password", Value: newValue})
	if err != nil {
		t.Fatal(err)
	}
	if u := updated.GetSecret(); u.GetId() != sec.GetId() || !u.GetUpdateTime().AsTime().After(sec.GetUpdateTime().AsTime()) ||
		!u.GetCreateTime().AsTime().Equal(sec.GetCreateTime().AsTime()) {
		t.Fatalf("updated %v, was %v", u, sec)
	}
	if got := stored(t, env, sec.GetTenantId(), "db/password"); !bytes.Equal(got, newValue) {
		t.Fatalf("stored value after update %q", got)
	}
	_, err = c.Update(ctx, &secretsv1.UpdateRequest{Name: "nope", Value: newValue})
	wantCode(t, err, connect.CodeNotFound)

	if _, err := c.Delete(ctx, &secretsv1.DeleteRequest{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Delete(ctx, &secretsv1.DeleteRequest{Name: "a"})
	wantCode(t, err, connect.CodeNotFound)
	_, err = c.Update(ctx, &secretsv1.UpdateRequest{Name: "a", Value: newValue})
	wantCode(t, err, connect.CodeNotFound)

	// Audited, and announced as events, without values.
	audit, err := env.Audit(env.AdminKey).List(ctx, &auditv1.ListRequest{Outcome: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]int{}
	for _, e := range audit.GetEvents() {
		methods[e.GetMethod()]++
		raw, _ := protojson.Marshal(e)
		notInClear(t, "audit event", raw, value, newValue)
	}
	if methods["secrets/create"] != 4 || methods["secrets/update"] != 1 || methods["secrets/delete"] != 1 {
		t.Fatalf("audit %v", methods)
	}
	evs, err := eventsv1connect.NewEventsServiceClient(env.HTTPClient(env.AdminKey), env.URL).List(ctx, &eventsv1.ListRequest{Subject: "secret/" + sec.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(evs.GetEvents()); n != 2 || evs.GetEvents()[0].GetType() != "secret.updated" || evs.GetEvents()[1].GetType() != "secret.created" {
		t.Fatalf("events %v", evs.GetEvents())
	}
	// Nowhere in the database, in any table, is a value kept in the clear.
	notInDatabase(t, env, value, newValue)
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
	acme, globex := client(env, a.GetOwnerApiKey()), client(env, b.GetOwnerApiKey())
	created, err := acme.Create(ctx, &secretsv1.CreateRequest{Name: "token", Value: []byte("acme-value")})
	if err != nil {
		t.Fatal(err)
	}
	if created.GetSecret().GetTenantId() != a.GetTenant().GetId() {
		t.Fatalf("tenant %s", created.GetSecret().GetTenantId())
	}

	list, err := globex.List(ctx, &secretsv1.ListRequest{})
	if err != nil || len(list.GetSecrets()) != 0 {
		t.Fatalf("globex lists %v (%v)", list, err)
	}
	_, err = globex.Update(ctx, &secretsv1.UpdateRequest{Name: "token", Value: []byte("globex-value")})
	wantCode(t, err, connect.CodeNotFound)
	_, err = globex.Delete(ctx, &secretsv1.DeleteRequest{Name: "token"})
	wantCode(t, err, connect.CodeNotFound)
	// The same name in another tenant is another secret.
	other, err := globex.Create(ctx, &secretsv1.CreateRequest{Name: "token", Value: []byte("globex-value")})
	if err != nil || other.GetSecret().GetId() == created.GetSecret().GetId() {
		t.Fatalf("globex create: %v %v", other, err)
	}
	if got := stored(t, env, a.GetTenant().GetId(), "token"); string(got) != "acme-value" {
		t.Fatalf("acme's value %q", got)
	}
	if got := stored(t, env, b.GetTenant().GetId(), "token"); string(got) != "globex-value" {
		t.Fatalf("globex's value %q", got)
	}
	if _, err := globex.Delete(ctx, &secretsv1.DeleteRequest{Name: "token"}); err != nil {
		t.Fatal(err)
	}
	list, err = acme.List(ctx, &secretsv1.ListRequest{})
	if err != nil || len(list.GetSecrets()) != 1 || list.GetSecrets()[0].GetId() != created.GetSecret().GetId() {
		t.Fatalf("acme lists %v (%v)", list, err)
	}
}

// TestSealedValueBoundToRow: a sealed value copied into another secret's row does not open.
func TestSealedValueBoundToRow(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	for _, n := range []string{"one", "two"} {
		if _, err := c.Create(ctx, &secretsv1.CreateRequest{Name: n, Value: []byte(n + "-value")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Pool.Exec(ctx, "UPDATE secrets SET value_sealed = (SELECT value_sealed FROM secrets WHERE name = 'one') WHERE name = 'two'"); err != nil {
		t.Fatal(err)
	}
	var id uuid.UUID
	var sealed []byte
	if err := env.Pool.QueryRow(ctx, "SELECT id, value_sealed FROM secrets WHERE name = 'two'").Scan(&id, &sealed); err != nil {
		t.Fatal(err)
	}
	s, err := secret.NewSealer(servertest.Secret)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(id, sealed); err == nil {
		t.Fatal("a value sealed for another row opened")
	}
	if other, err := secret.NewSealer(servertest.Secret + "-other"); err != nil {
		t.Fatal(err)
	} else if _, err := other.Open(id, sealed); err == nil {
		t.Fatal("a value opened under another deployment secret")
	}
}

func TestPermissions(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	admin := env.IAM(env.AdminKey)
	p, err := admin.CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_SERVICE_ACCOUNT, Name: "viewer"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateRoleBinding(ctx, &iamv1.CreateRoleBindingRequest{PrincipalId: p.GetPrincipal().GetId(), Role: iamv1.Role_ROLE_VIEWER}); err != nil {
		t.Fatal(err)
	}
	k, err := admin.CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: p.GetPrincipal().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client(env, env.AdminKey).Create(ctx, &secretsv1.CreateRequest{Name: "s", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	viewer := client(env, k.GetKey())
	_, err = viewer.Create(ctx, &secretsv1.CreateRequest{Name: "t", Value: []byte("v")})
	wantCode(t, err, connect.CodePermissionDenied)
	_, err = viewer.Update(ctx, &secretsv1.UpdateRequest{Name: "s", Value: []byte("w")})
	wantCode(t, err, connect.CodePermissionDenied)
	_, err = viewer.Delete(ctx, &secretsv1.DeleteRequest{Name: "s"})
	wantCode(t, err, connect.CodePermissionDenied)
	if list, err := viewer.List(ctx, &secretsv1.ListRequest{}); err != nil || len(list.GetSecrets()) != 1 {
		t.Fatalf("viewer lists %v (%v)", list, err)
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env, env.AdminKey)
	for _, n := range []string{"", "-a", "a-", "has space", strings.Repeat("x", 64), "ü"} {
		_, err := c.Create(ctx, &secretsv1.CreateRequest{Name: n, Value: []byte("v")})
		wantCode(t, err, connect.CodeInvalidArgument)
	}
	_, err := c.Create(ctx, &secretsv1.CreateRequest{Name: "empty"})
	wantCode(t, err, connect.CodeInvalidArgument)
	big := bytes.Repeat([]byte("v"), secrets.MaxValueBytes+1)
	_, err = c.Create(ctx, &secretsv1.CreateRequest{Name: "big", Value: big})
	wantCode(t, err, connect.CodeInvalidArgument)
	if strings.Contains(err.Error(), "vvvv") {
		t.Fatalf("the error quotes the value: %v", err)
	}
	if _, err := c.Create(ctx, &secretsv1.CreateRequest{Name: "max", Value: big[:secrets.MaxValueBytes]}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Update(ctx, &secretsv1.UpdateRequest{Name: "max", Value: big})
	wantCode(t, err, connect.CodeInvalidArgument)
	_, err = c.Delete(ctx, &secretsv1.DeleteRequest{Name: ""})
	wantCode(t, err, connect.CodeInvalidArgument)
	_, err = c.List(ctx, &secretsv1.ListRequest{PageToken: "garbage"})
	wantCode(t, err, connect.CodeInvalidArgument)
}
