package webhooks_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/go/bettercompute/events/v1/eventsv1connect"
	"github.com/better-compute/better-compute/gen/go/bettercompute/webhooks/v1/webhooksv1connect"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/guard"
	"github.com/better-compute/better-compute/internal/registry"
	"github.com/better-compute/better-compute/internal/seal"
	"github.com/better-compute/better-compute/internal/webhook"
	"github.com/better-compute/better-compute/server/internal/webhooks"
	"github.com/better-compute/better-compute/server/servertest"
)

// These tests run the API with the sinks role behind it: webhooks created through the API receive
// the outbox, and their dead letters are listed and replayed through it.
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

// privateAPI serves WebhooksService with private addresses allowed, as a deployment with
// webhooks.allowPrivate does, and returns a client with a root admin key.
func privateAPI(t *testing.T) (webhooksv1connect.WebhooksServiceClient, *pgxpool.Pool) {
	t.Helper()
	pool := dbtest.Pool(t)
	reg, err := registry.FromGlobal()
	if err != nil {
		t.Fatal(err)
	}
	idem, err := seal.New(servertest.Secret, "idempotency")
	if err != nil {
		t.Fatal(err)
	}
	svc := webhooks.New(pool, admission.New(pool, idem, nil), mustSealer(t), true)
	log := slog.New(slog.DiscardHandler)
	mux := http.NewServeMux()
	mux.Handle(webhooksv1connect.NewWebhooksServiceHandler(svc, connect.WithInterceptors(guard.New(reg, auth.NewEmbedded(pool, log), pool, log))))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	key, err := auth.MintAdminKey(ctx, pool, "admin")
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		r.Header.Set("X-Better-Compute", "1")
		r.Header.Set("Authorization", "Bearer "+key.String())
		return http.DefaultTransport.RoundTrip(r)
	})}
	return webhooksv1connect.NewWebhooksServiceClient(client, srv.URL), pool
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// receiver records the webhooks it receives after verifying them with the secret.
type receiver struct {
	t      *testing.T
	mu     sync.Mutex
	secret string
	got    []map[string]any
	ids    []string
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err := webhook.Verify(rc.secret, r.Header, body); err != nil {
		rc.t.Errorf("receiver: %v", err)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		rc.t.Errorf("receiver: %v", err)
	}
	rc.got = append(rc.got, m)
	rc.ids = append(rc.ids, r.Header.Get(webhook.HeaderID))
}

func (rc *receiver) received() ([]map[string]any, []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]map[string]any(nil), rc.got...), append([]string(nil), rc.ids...)
}

func mustSealer(t *testing.T) *seal.Sealer {
	t.Helper()
	s, err := webhook.NewSealer(servertest.Secret)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
