package webhooks_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	webhooksv1 "github.com/better-compute/better-compute/gen/go/bettercompute/webhooks/v1"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/sinks"
)

// TestDeliveryEndToEnd: webhooks/test sends a signed event synchronously; and events the API
// writes reach the webhook through the sinks role, signed with the secret create returned.
func TestDeliveryEndToEnd(t *testing.T) {
	t.Parallel()
	hooks, pool := privateAPI(t)
	rc := &receiver{t: t}
	srv := httptest.NewServer(rc)
	defer srv.Close()

	created, err := hooks.Create(ctx, &webhooksv1.CreateRequest{Url: srv.URL + "/in"})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetWebhook().GetId()
	rc.mu.Lock()
	rc.secret = created.GetSecret()
	rc.mu.Unlock()

	res, err := hooks.Test(ctx, &webhooksv1.TestRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetStatusCode() != http.StatusOK || res.GetError() != "" || res.GetLatency().AsDuration() <= 0 {
		t.Fatalf("test: %v", res)
	}
	got, ids := rc.received()
	if len(got) != 1 || got[0]["type"] != "webhook.test" || ids[0] != res.GetEventId() || got[0]["data"].(map[string]any)["webhookId"] != id {
		t.Fatalf("received %v %v", got, ids)
	}
	var audited int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM audit_events WHERE method = 'webhooks/test' AND target = $1 AND outcome = 'ok'", "webhook/"+id).Scan(&audited); err != nil || audited != 1 {
		t.Fatalf("audit rows %d %v", audited, err)
	}

	// The sinks role delivers the webhook's own creation event and a later one.
	second, err := hooks.Create(ctx, &webhooksv1.CreateRequest{Url: "https://example.com/", EventTypes: []string{"node.disk.full"}})
	if err != nil {
		t.Fatal(err)
	}
	sealer := mustSealer(t)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- sinks.Run(runCtx, locks.NewHolder(pool, "sinks", nil), pool, sinks.Options{
			Sealer: sealer, AllowPrivate: true, Refresh: 50 * time.Millisecond, Poll: 10 * time.Millisecond,
		})
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, _ = rc.received()
		if len(got) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("received %v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Two subjects: delivered concurrently, in no particular order between them.
	subjects := map[string]bool{}
	for _, m := range got[1:] {
		if m["type"] != "webhook.created" {
			t.Fatalf("received %v", got)
		}
		subjects[m["subject"].(string)] = true
	}
	if !subjects["webhook/"+id] || !subjects["webhook/"+second.GetWebhook().GetId()] {
		t.Fatalf("received %v", got)
	}
	// A delivered cursor has no error.
	w, err := db.New(pool).GetWebhook(ctx, db.GetWebhookParams{TenantID: mustTenant(t, pool), ID: uuid.MustParse(id)})
	if err != nil || w.LastError != "" {
		t.Fatalf("webhook after delivery: %+v %v", w, err)
	}
}

func mustTenant(t *testing.T, pool *pgxpool.Pool) uuid.UUID {
	t.Helper()
	var id uuid.UUID
	if err := pool.QueryRow(ctx, "SELECT id FROM tenants WHERE is_root").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
