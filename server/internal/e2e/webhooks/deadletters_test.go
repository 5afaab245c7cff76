package webhooks_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	auditv1 "github.com/better-compute/better-compute/gen/go/bettercompute/audit/v1"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	webhooksv1 "github.com/better-compute/better-compute/gen/go/bettercompute/webhooks/v1"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/sinks"
	"github.com/better-compute/better-compute/internal/webhook"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

// flaky is a webhook endpoint that answers 500 until up, then records what it receives.
type flaky struct {
	t      *testing.T
	secret atomic.Pointer[string]
	up     atomic.Bool
	mu     sync.Mutex
	ids    []string
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if s := f.secret.Load(); s == nil || webhook.Verify(*s, r.Header, body) != nil {
		f.t.Errorf("flaky: unsigned delivery")
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if !f.up.Load() {
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	f.mu.Lock()
	f.ids = append(f.ids, r.Header.Get(webhook.HeaderID))
	f.mu.Unlock()
}

func (f *flaky) received() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ids...)
}

// TestDeadLettersListAndReplay: a webhook whose endpoint answers 500 becomes FAILING after a
// short retry schedule with its events parked; listDeadLetters pages them for its own tenant
// only; once the endpoint recovers, replayDeadLetters delivers them with their ids and makes the
// webhook HEALTHY.
func TestDeadLettersListAndReplay(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, dbtest.Pool(t), func(o *server.Options) { o.WebhooksAllowPrivate = true })
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
	globex, _ := clients(env, b.GetOwnerApiKey())

	endpoint := &flaky{t: t}
	srv := httptest.NewServer(endpoint)
	t.Cleanup(srv.Close)
	created, err := acme.Create(ctx, &webhooksv1.CreateRequest{Url: srv.URL + "/in/token", EventTypes: []string{"node.disk.full"}})
	if err != nil {
		t.Fatal(err)
	}
	endpoint.secret.Store(&created.Secret)
	id := created.GetWebhook().GetId()
	if created.GetWebhook().GetState() != webhooksv1.WebhookState_WEBHOOK_STATE_HEALTHY {
		t.Fatalf("new webhook %v", created.GetWebhook())
	}

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- sinks.Run(runCtx, locks.NewHolder(env.Pool, "sinks", nil), env.Pool, sinks.Options{
			Sealer: mustSealer(t), AllowPrivate: true, Refresh: 50 * time.Millisecond, Poll: 10 * time.Millisecond,
			MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, GiveUpAfter: 200 * time.Millisecond,
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	for i := range 3 {
		if _, err := env.Pool.Exec(ctx, `INSERT INTO outbox (tenant_id, type, subject, payload) VALUES ($1, 'node.disk.full', 'thing/1', jsonb_build_object('n', $2::int))`,
			a.GetTenant().GetId(), i); err != nil {
			t.Fatal(err)
		}
	}
	var w *webhooksv1.Webhook
	poll.Until(t, 20*time.Second, "the webhook failing with 3 events parked", func() bool {
		res, err := acme.Get(ctx, &webhooksv1.GetRequest{Id: id})
		w = res.GetWebhook()
		return err == nil && w.GetState() == webhooksv1.WebhookState_WEBHOOK_STATE_FAILING && w.GetDeadLetters() == 3
	})
	if w.GetFailure() == "" || w.GetFailingSinceTime() == nil || strings.Contains(w.GetFailure(), "token") {
		t.Fatalf("failing webhook %v", w)
	}
	list, err := acme.List(ctx, &webhooksv1.ListRequest{})
	if err != nil || len(list.GetWebhooks()) != 1 || list.GetWebhooks()[0].GetState() != webhooksv1.WebhookState_WEBHOOK_STATE_FAILING {
		t.Fatalf("list %v (%v)", list, err)
	}

	// Two pages, oldest first.
	first, err := acme.ListDeadLetters(ctx, &webhooksv1.ListDeadLettersRequest{Id: id, PageSize: 2})
	if err != nil || len(first.GetDeadLetters()) != 2 || first.GetNextPageToken() == "" {
		t.Fatalf("first page %v (%v)", first, err)
	}
	rest, err := acme.ListDeadLetters(ctx, &webhooksv1.ListDeadLettersRequest{Id: id, PageSize: 2, PageToken: first.GetNextPageToken()})
	if err != nil || len(rest.GetDeadLetters()) != 1 || rest.GetNextPageToken() != "" {
		t.Fatalf("second page %v (%v)", rest, err)
	}
	var parked []string
	for i, d := range append(first.GetDeadLetters(), rest.GetDeadLetters()...) {
		if d.GetType() != "node.disk.full" || d.GetSubject() != "thing/1" || d.GetData().GetStructValue().GetFields()["n"].GetNumberValue() != float64(i) ||
			d.GetError() == "" || d.GetQueued() || d.GetParkTime() == nil {
			t.Fatalf("dead letter %d: %v", i, d)
		}
		parked = append(parked, d.GetEventId())
	}

	// Another tenant sees none of it.
	_, err = globex.ListDeadLetters(ctx, &webhooksv1.ListDeadLettersRequest{Id: id})
	wantCode(t, err, connect.CodeNotFound)
	_, err = globex.ReplayDeadLetters(ctx, &webhooksv1.ReplayDeadLettersRequest{Id: id})
	wantCode(t, err, connect.CodeNotFound)
	_, err = acme.ListDeadLetters(ctx, &webhooksv1.ListDeadLettersRequest{Id: "nope"})
	wantCode(t, err, connect.CodeInvalidArgument)
	_, err = acme.ListDeadLetters(ctx, &webhooksv1.ListDeadLettersRequest{Id: id, PageSize: -1})
	wantCode(t, err, connect.CodeInvalidArgument)
	_, err = acme.ReplayDeadLetters(ctx, &webhooksv1.ReplayDeadLettersRequest{Id: uuid.NewString()})
	wantCode(t, err, connect.CodeNotFound)

	// The endpoint recovers; a replay delivers the parked events, with their ids.
	endpoint.up.Store(true)
	replayed, err := acme.ReplayDeadLetters(ctx, &webhooksv1.ReplayDeadLettersRequest{Id: id})
	if err != nil || replayed.GetQueued() != 3 {
		t.Fatalf("replay %v (%v)", replayed, err)
	}
	poll.Until(t, 20*time.Second, "the replayed events delivered", func() bool { return len(endpoint.received()) >= 3 })
	if got := endpoint.received(); strings.Join(got[:3], ",") != strings.Join(parked, ",") {
		t.Fatalf("received %v, parked %v", got, parked)
	}
	poll.Until(t, 20*time.Second, "the webhook healthy with no dead letters", func() bool {
		res, err := acme.Get(ctx, &webhooksv1.GetRequest{Id: id})
		return err == nil && res.GetWebhook().GetState() == webhooksv1.WebhookState_WEBHOOK_STATE_HEALTHY &&
			res.GetWebhook().GetDeadLetters() == 0 && res.GetWebhook().GetFailure() == ""
	})
	audit, err := env.Audit(a.GetOwnerApiKey()).List(ctx, &auditv1.ListRequest{Outcome: "ok"})
	if err != nil {
		t.Fatal(err)
	}
	audited := false
	for _, e := range audit.GetEvents() {
		audited = audited || (e.GetMethod() == "webhooks/replayDeadLetters" && e.GetTarget() == "webhook/"+id)
	}
	if !audited {
		t.Fatalf("replay not audited: %v", audit.GetEvents())
	}
}
