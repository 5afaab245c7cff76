package sinks

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/seal"
	"github.com/better-compute/better-compute/internal/webhook"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const testSecret = "test-secret-0123456789abcdef-0123456789"

func testSealer(t testing.TB) *seal.Sealer {
	t.Helper()
	s, err := webhook.NewSealer(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// newTenant creates a tenant below the root tenant (created on first use).
func newTenant(t testing.TB, pool *pgxpool.Pool) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO tenants (id, name, is_root) VALUES ($1, 'root', true) ON CONFLICT DO NOTHING`, uuid.New()); err != nil {
		t.Fatal(err)
	}
	id := uuid.New()
	if _, err := pool.Exec(ctx, `INSERT INTO tenants (id, parent_id, name) VALUES ($1, (SELECT id FROM tenants WHERE is_root), $2)`,
		id, "t"+strings.ReplaceAll(id.String(), "-", "")[:20]); err != nil {
		t.Fatal(err)
	}
	return id
}

// newWebhook registers a webhook as webhooks/create does, and returns its id and secret.
func newWebhook(t testing.TB, pool *pgxpool.Pool, tenant uuid.UUID, url string, types ...string) (uuid.UUID, string) {
	t.Helper()
	ctx := context.Background()
	id, secret := uuid.Must(uuid.NewV7()), webhook.NewSecret()
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		q := db.New(tx)
		if _, err := q.CreateWebhook(ctx, db.CreateWebhookParams{
			ID: id, TenantID: tenant, Url: url, EventTypes: append([]string{}, types...), SecretSealed: webhook.SealSecret(testSealer(t), id, secret),
		}); err != nil {
			return err
		}
		return q.EnsureSinkCursor(ctx, db.EnsureSinkCursorParams{Sink: webhook.SinkName(id), WebhookID: &id})
	})
	if err != nil {
		t.Fatal(err)
	}
	return id, secret
}

// emit writes events in one transaction, as admission does: one per subject, each carrying its
// per-subject sequence number.
func emit(t testing.TB, q db.DBTX, tenant uuid.UUID, typ string, seqs map[string]int) {
	t.Helper()
	for subject, seq := range seqs {
		if _, err := q.Exec(context.Background(), `INSERT INTO outbox (tenant_id, type, subject, payload) VALUES ($1, $2, $3, $4)`,
			tenant, typ, subject, fmt.Sprintf(`{"seq": %d}`, seq)); err != nil {
			t.Fatal(err)
		}
	}
}

// delivery is what a receiver got.
type delivery struct {
	ID, Type, Subject string
	Seq               int
}

// receiver is a webhook endpoint that verifies every request and records what it accepted.
type receiver struct {
	t      testing.TB
	secret atomic.Pointer[string]
	// fail answers 500 to this many more requests.
	fail  atomic.Int64
	srv   *httptest.Server
	mu    sync.Mutex
	got   []delivery
	nFail atomic.Int64
}

func newReceiver(t testing.TB) *receiver {
	t.Helper()
	r := &receiver{t: t}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) setSecret(s string) { r.secret.Store(&s) }

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if err := webhook.Verify(*r.secret.Load(), req.Header, body); err != nil {
		r.t.Errorf("receiver: %v", err)
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	if r.fail.Add(-1) >= 0 {
		r.nFail.Add(1)
		http.Error(w, "try again later", http.StatusInternalServerError)
		return
	}
	var msg struct {
		Type    string `json:"type"`
		Subject string `json:"subject"`
		Data    struct {
			Seq int `json:"seq"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		r.t.Errorf("receiver: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.got = append(r.got, delivery{ID: req.Header.Get(webhook.HeaderID), Type: msg.Type, Subject: msg.Subject, Seq: msg.Data.Seq})
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// unique counts distinct event ids received.
func (r *receiver) unique() int {
	seen := map[string]bool{}
	for _, d := range r.deliveries() {
		seen[d.ID] = true
	}
	return len(seen)
}

// checkOrder verifies at-least-once, in-order delivery per subject: whenever event k of a subject
// arrives, events 1..k-1 of it have all arrived before (a redelivery replays a suffix in order),
// and every subject got all of 1..want[subject].
func checkOrder(t testing.TB, got []delivery, want map[string]int) {
	t.Helper()
	prefix := map[string]int{} // highest k with 1..k all received
	seen := map[string]map[int]bool{}
	for _, d := range got {
		if d.Seq > prefix[d.Subject]+1 {
			t.Fatalf("subject %s: event %d arrived before event %d (arrivals %v)", d.Subject, d.Seq, prefix[d.Subject]+1, got)
		}
		if seen[d.Subject] == nil {
			seen[d.Subject] = map[int]bool{}
		}
		seen[d.Subject][d.Seq] = true
		for seen[d.Subject][prefix[d.Subject]+1] {
			prefix[d.Subject]++
		}
	}
	for s, n := range want {
		if prefix[s] != n {
			t.Errorf("subject %s: received 1..%d, want 1..%d", s, prefix[s], n)
		}
	}
}

// fastOptions are sinks options for tests: short intervals, a short lease, private addresses
// allowed (receivers listen on 127.0.0.1).
func fastOptions(t testing.TB) Options {
	t.Helper()
	return Options{
		Sealer: testSealer(t), AllowPrivate: true,
		Refresh: 50 * time.Millisecond, Poll: 10 * time.Millisecond,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond,
		LeaseTTL: 600 * time.Millisecond, FlushInterval: 50 * time.Millisecond,
	}
}
