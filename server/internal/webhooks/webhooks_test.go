package webhooks_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	auditv1 "github.com/better-compute/better-compute/gen/go/bettercompute/audit/v1"
	eventsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/events/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/events/v1/eventsv1connect"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	webhooksv1 "github.com/better-compute/better-compute/gen/go/bettercompute/webhooks/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/webhooks/v1/webhooksv1connect"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/guard"
	"github.com/better-compute/better-compute/internal/webhook"
	"github.com/better-compute/better-compute/server/internal/webhooks"
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

func clients(env *servertest.Env, key string) (webhooksv1connect.WebhooksServiceClient, eventsv1connect.EventsServiceClient) {
	return webhooksv1connect.NewWebhooksServiceClient(env.HTTPClient(key), env.URL),
		eventsv1connect.NewEventsServiceClient(env.HTTPClient(key), env.URL)
}

func TestCreateGetListDelete(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	hooks, events := clients(env, env.AdminKey)

	req := &webhooksv1.CreateRequest{
		Url: "https://example.com/hooks?token=abc", EventTypes: []string{"node.cordoned", "node.retired", "node.cordoned"}, Description: "ops",
	}
	cctx, ci := connect.NewClientContext(ctx)
	ci.RequestHeader().Set(guard.IdempotencyKeyHeader, "create-1")
	created, err := hooks.Create(cctx, req)
	if err != nil {
		t.Fatal(err)
	}
	w, secret := created.GetWebhook(), created.GetSecret()
	if !strings.HasPrefix(secret, webhook.SecretPrefix) || len(secret) < 40 {
		t.Fatalf("secret %q", secret)
	}
	if got := w.GetEventTypes(); len(got) != 2 || got[0] != "node.cordoned" || got[1] != "node.retired" {
		t.Fatalf("event types %v", got)
	}
	// A retry with the same key returns the same webhook and secret, and creates nothing.
	cctx, ci = connect.NewClientContext(ctx)
	ci.RequestHeader().Set(guard.IdempotencyKeyHeader, "create-1")
	again, err := hooks.Create(cctx, req)
	if err != nil || again.GetWebhook().GetId() != w.GetId() || again.GetSecret() != secret {
		t.Fatalf("retry: %v %v", again, err)
	}
	// The secret is stored sealed, never in the clear.
	var sealed []byte
	if err := env.Pool.QueryRow(ctx, "SELECT secret_sealed FROM webhooks WHERE id = $1", w.GetId()).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealed), secret[len(webhook.SecretPrefix):]) {
		t.Fatal("the secret is stored in the clear")
	}

	got, err := hooks.Get(ctx, &webhooksv1.GetRequest{Id: w.GetId()})
	if err != nil || got.GetWebhook().GetUrl() != w.GetUrl() || got.GetWebhook().GetDescription() != "ops" {
		t.Fatalf("get: %v %v", got, err)
	}
	for range 2 {
		if _, err := hooks.Create(ctx, &webhooksv1.CreateRequest{Url: "https://example.org/h"}); err != nil {
			t.Fatal(err)
		}
	}
	// Pages of one: three webhooks, in creation order.
	var ids []string
	tok := ""
	for {
		page, err := hooks.List(ctx, &webhooksv1.ListRequest{PageSize: 1, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range page.GetWebhooks() {
			ids = append(ids, h.GetId())
		}
		if tok = page.GetNextPageToken(); tok == "" {
			break
		}
	}
	if len(ids) != 3 || ids[0] != w.GetId() {
		t.Fatalf("listed %v", ids)
	}

	if _, err := hooks.Delete(ctx, &webhooksv1.DeleteRequest{Id: w.GetId()}); err != nil {
		t.Fatal(err)
	}
	_, err = hooks.Get(ctx, &webhooksv1.GetRequest{Id: w.GetId()})
	wantCode(t, err, connect.CodeNotFound)
	_, err = hooks.Delete(ctx, &webhooksv1.DeleteRequest{Id: w.GetId()})
	wantCode(t, err, connect.CodeNotFound)
	var cursors int
	if err := env.Pool.QueryRow(ctx, "SELECT count(*) FROM sink_cursors WHERE webhook_id = $1", w.GetId()).Scan(&cursors); err != nil || cursors != 0 {
		t.Fatalf("deleted webhook's cursors: %d %v", cursors, err)
	}

	// The changes are audited, and announced as events (without the secret).
	audit, err := env.Audit(env.AdminKey).List(ctx, &auditv1.ListRequest{Outcome: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]int{}
	for _, e := range audit.GetEvents() {
		methods[e.GetMethod()]++
	}
	if methods["webhooks/create"] != 3 || methods["webhooks/delete"] != 1 {
		t.Fatalf("audit %v", methods)
	}
	evs, err := events.List(ctx, &eventsv1.ListRequest{Subject: "webhook/" + w.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(evs.GetEvents()); n != 2 || evs.GetEvents()[0].GetType() != "webhook.deleted" || evs.GetEvents()[1].GetType() != "webhook.created" {
		t.Fatalf("events %v", evs.GetEvents())
	}
	createdEv := evs.GetEvents()[1]
	// Events carry the URL without its path and query, which may hold a token.
	if createdEv.GetData().GetStructValue().GetFields()["url"].GetStringValue() != "https://example.com/[redacted]" || !strings.HasPrefix(createdEv.GetId(), "evt_") {
		t.Fatalf("created event %v", createdEv)
	}
	b, _ := json.Marshal(createdEv.GetData().AsInterface())
	if strings.Contains(string(b), secret) {
		t.Fatal("the event carries the secret")
	}
	// A type filter, and paging newest first.
	one, err := events.List(ctx, &eventsv1.ListRequest{Type: "webhook.created", PageSize: 2})
	if err != nil || len(one.GetEvents()) != 2 || one.GetNextPageToken() == "" {
		t.Fatalf("filtered page: %v %v", one, err)
	}
	rest, err := events.List(ctx, &eventsv1.ListRequest{Type: "webhook.created", PageSize: 2, PageToken: one.GetNextPageToken()})
	if err != nil || len(rest.GetEvents()) != 1 || rest.GetNextPageToken() != "" || rest.GetEvents()[0].GetId() != createdEv.GetId() {
		t.Fatalf("second page: %v %v", rest, err)
	}
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
	acme, _ := clients(env, a.GetOwnerApiKey())
	globex, globexEvents := clients(env, b.GetOwnerApiKey())
	created, err := acme.Create(ctx, &webhooksv1.CreateRequest{Url: "https://acme.example/hook"})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetWebhook().GetId()
	if created.GetWebhook().GetTenantId() != a.GetTenant().GetId() {
		t.Fatalf("tenant %s", created.GetWebhook().GetTenantId())
	}

	_, err = globex.Get(ctx, &webhooksv1.GetRequest{Id: id})
	wantCode(t, err, connect.CodeNotFound)
	_, err = globex.Delete(ctx, &webhooksv1.DeleteRequest{Id: id})
	wantCode(t, err, connect.CodeNotFound)
	_, err = globex.Test(ctx, &webhooksv1.TestRequest{Id: id})
	wantCode(t, err, connect.CodeNotFound)
	list, err := globex.List(ctx, &webhooksv1.ListRequest{})
	if err != nil || len(list.GetWebhooks()) != 0 {
		t.Fatalf("globex lists %v (%v)", list, err)
	}
	evs, err := globexEvents.List(ctx, &eventsv1.ListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.GetEvents() {
		if e.GetTenantId() != b.GetTenant().GetId() {
			t.Fatalf("globex sees event %v", e)
		}
	}
	// Still there for its own tenant.
	if _, err := acme.Get(ctx, &webhooksv1.GetRequest{Id: id}); err != nil {
		t.Fatal(err)
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
	viewer, viewerEvents := clients(env, k.GetKey())
	_, err = viewer.Create(ctx, &webhooksv1.CreateRequest{Url: "https://example.com/"})
	wantCode(t, err, connect.CodePermissionDenied)
	if _, err := viewer.List(ctx, &webhooksv1.ListRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := viewerEvents.List(ctx, &eventsv1.ListRequest{}); err != nil {
		t.Fatal(err)
	}
}

func TestBadRequests(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	hooks, _ := clients(env, env.AdminKey)
	for _, u := range []string{
		"", "not a url", "ftp://example.com/", "https://", "https://user:pw@example.com/",
		// The test server does not allow private addresses.
		"http://127.0.0.1:9000/hook", "http://localhost/", "http://169.254.169.254/latest/meta-data/", "http://[::1]/", "http://10.0.0.1/",
	} {
		_, err := hooks.Create(ctx, &webhooksv1.CreateRequest{Url: u})
		wantCode(t, err, connect.CodeInvalidArgument)
		if !strings.Contains(err.Error(), "url") {
			t.Errorf("%q: %v does not name url", u, err)
		}
	}
	_, err := hooks.Create(ctx, &webhooksv1.CreateRequest{Url: "https://example.com/", EventTypes: []string{"node updated"}})
	wantCode(t, err, connect.CodeInvalidArgument)
	// Only the catalog's types (docs/events.md) and daemons' reports: a typo is refused, by index.
	for _, types := range [][]string{{"node.cordoned", "node.updated"}, {"node.cordoned", "node.spec.applyed"}, {"lease.placed", "lease"}} {
		_, err = hooks.Create(ctx, &webhooksv1.CreateRequest{Url: "https://example.com/", EventTypes: types})
		wantCode(t, err, connect.CodeInvalidArgument)
		if !strings.Contains(err.Error(), "event_types[1]") {
			t.Errorf("%v: %v does not name event_types[1]", types, err)
		}
	}
	_, err = hooks.Create(ctx, &webhooksv1.CreateRequest{Url: "https://example.com/", Description: strings.Repeat("x", 501)})
	wantCode(t, err, connect.CodeInvalidArgument)
	_, err = hooks.Get(ctx, &webhooksv1.GetRequest{Id: "nope"})
	wantCode(t, err, connect.CodeInvalidArgument)
	_, err = hooks.Get(ctx, &webhooksv1.GetRequest{Id: uuid.NewString()})
	wantCode(t, err, connect.CodeNotFound)

	for range webhooks.MaxPerTenant {
		if _, err := hooks.Create(ctx, &webhooksv1.CreateRequest{Url: "https://example.com/"}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = hooks.Create(ctx, &webhooksv1.CreateRequest{Url: "https://example.com/"})
	wantCode(t, err, connect.CodeResourceExhausted) // the default of rateLimits.tenant.webhooks
}

// TestTestRefusesPrivateAddress: a webhook whose URL leads to a private address (stored while
// they were allowed, or a name that resolves to one) is refused when sending, not only at create.
func TestTestRefusesPrivateAddress(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	hooks, _ := clients(env, env.AdminKey)
	rcv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("the private receiver was reached") }))
	defer rcv.Close()
	created, err := hooks.Create(ctx, &webhooksv1.CreateRequest{Url: "https://example.com/"})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetWebhook().GetId()
	if _, err := env.Pool.Exec(ctx, "UPDATE webhooks SET url = $2 WHERE id = $1", id, rcv.URL); err != nil {
		t.Fatal(err)
	}
	res, err := hooks.Test(ctx, &webhooksv1.TestRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetStatusCode() != 0 || !strings.Contains(res.GetError(), "not allowed") {
		t.Fatalf("test of a private address: %v", res)
	}
}
