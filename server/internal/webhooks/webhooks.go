// Package webhooks implements bettercompute.webhooks.v1.WebhooksService: a tenant's webhooks,
// which the sinks role (workers/sinks) delivers the tenant's events to. Every method acts in the
// caller's tenant: other tenants' webhooks are simply not found.
package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	webhooksv1 "github.com/better-compute/better-compute/gen/go/bettercompute/webhooks/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/webhooks/v1/webhooksv1connect"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/page"
	"github.com/better-compute/better-compute/internal/quota"
	"github.com/better-compute/better-compute/internal/seal"
	"github.com/better-compute/better-compute/internal/webhook"
)

// Limits of a tenant's webhooks. Each webhook has its own dispatcher, lease and poll in the
// sinks role, so their number is bounded.
const (
	MaxPerTenant      = quota.DefaultWebhooks // the default of rateLimits.tenant.webhooks
	maxEventTypes     = 50
	maxEventTypeLen   = 100
	maxDescriptionLen = 500
	// testTimeout bounds webhooks/test's delivery, which the caller waits for.
	testTimeout = 10 * time.Second
)

// Service answers WebhooksService calls.
type Service struct {
	pool         *pgxpool.Pool
	admit        *admission.Admitter
	sealer       *seal.Sealer
	allowPrivate bool
	client       *http.Client
}

var _ webhooksv1connect.WebhooksServiceHandler = (*Service)(nil)

// New returns the service. sealer seals signing secrets (webhook.NewSealer of the deployment
// secret, the same the sinks role opens them with); allowPrivate lets URLs name private
// addresses (the configuration's webhooks.allowPrivate), for webhooks/create and webhooks/test.
func New(pool *pgxpool.Pool, admit *admission.Admitter, sealer *seal.Sealer, allowPrivate bool) *Service {
	return &Service{pool: pool, admit: admit, sealer: sealer, allowPrivate: allowPrivate, client: webhook.NewClient(allowPrivate, 2)}
}

// Create registers a webhook and returns its secret, once.
func (s *Service) Create(ctx context.Context, req *webhooksv1.CreateRequest) (*webhooksv1.CreateResponse, error) {
	if err := webhook.CheckURL(req.GetUrl(), s.allowPrivate); err != nil {
		return nil, apierr.InvalidArgument("url", "%v", err)
	}
	types, err := eventTypes(req.GetEventTypes())
	if err != nil {
		return nil, err
	}
	if len(req.GetDescription()) > maxDescriptionLen {
		return nil, apierr.InvalidArgument("description", "must be at most %d characters", maxDescriptionLen)
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*webhooksv1.CreateResponse, error) {
		if err := quota.Check(ctx, tx.Q, p.TenantID, quota.Webhooks, 1); err != nil {
			return nil, err
		}
		id, secret := uuid.Must(uuid.NewV7()), webhook.NewSecret()
		w, err := tx.Q.CreateWebhook(ctx, db.CreateWebhookParams{
			ID: id, TenantID: p.TenantID, Url: req.GetUrl(), Description: req.GetDescription(),
			EventTypes: types, SecretSealed: webhook.SealSecret(s.sealer, id, secret),
		})
		if err != nil {
			return nil, err
		}
		// The webhook receives events from transactions that had not ended when it was created.
		if err := tx.Q.EnsureSinkCursor(ctx, db.EnsureSinkCursorParams{Sink: webhook.SinkName(id), WebhookID: &id}); err != nil {
			return nil, err
		}
		tx.Target("webhook", id)
		if err := tx.Emit(p.TenantID, eventData(w)); err != nil {
			return nil, err
		}
		return &webhooksv1.CreateResponse{
			Webhook: toProto(db.GetWebhookRow{ID: w.ID, TenantID: w.TenantID, Url: w.Url, Description: w.Description, EventTypes: w.EventTypes, CreatedAt: w.CreatedAt}),
			Secret:  secret,
		}, nil
	})
}

// eventTypes validates and deduplicates a filter, keeping its order.
func eventTypes(in []string) ([]string, error) {
	if len(in) > maxEventTypes {
		return nil, apierr.InvalidArgument("event_types", "at most %d types", maxEventTypes)
	}
	out := []string{}
	for i, t := range in {
		if len(t) > maxEventTypeLen || !event.Known(t) {
			return nil, apierr.InvalidArgument(fmt.Sprintf("event_types[%d]", i),
				"%.100q is not an event type (docs/events.md lists them, such as node.cordoned; a daemon's reports are node.<namespace>.<name>)", t)
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

// Get returns a webhook of the caller's tenant.
func (s *Service) Get(ctx context.Context, req *webhooksv1.GetRequest) (*webhooksv1.GetResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	w, err := db.New(s.pool).GetWebhook(ctx, db.GetWebhookParams{TenantID: auth.Caller(ctx).TenantID, ID: id})
	if err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "webhook %s not found", id)
	}
	return &webhooksv1.GetResponse{Webhook: forCaller(ctx, toProto(w))}, nil
}

// List lists the webhooks of the caller's tenant, oldest first.
func (s *Service) List(ctx context.Context, req *webhooksv1.ListRequest) (*webhooksv1.ListResponse, error) {
	size, after, err := page.Of(req.GetPageSize(), req.GetPageToken(), uuid.Nil)
	if err != nil {
		return nil, err
	}
	rows, err := db.New(s.pool).ListWebhooks(ctx, db.ListWebhooksParams{TenantID: auth.Caller(ctx).TenantID, After: after, Lim: size + 1})
	if err != nil {
		return nil, err
	}
	rows, next := page.Next(rows, size, func(w db.ListWebhooksRow) uuid.UUID { return w.ID })
	res := &webhooksv1.ListResponse{NextPageToken: next}
	for _, w := range rows {
		res.Webhooks = append(res.Webhooks, forCaller(ctx, toProto(db.GetWebhookRow(w))))
	}
	return res, nil
}

// Delete removes a webhook; the sinks role stops delivering to it at its next look.
func (s *Service) Delete(ctx context.Context, req *webhooksv1.DeleteRequest) (*webhooksv1.DeleteResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*webhooksv1.DeleteResponse, error) {
		tx.Target("webhook", id)
		n, err := tx.Q.DeleteWebhook(ctx, db.DeleteWebhookParams{TenantID: p.TenantID, ID: id})
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, apierr.NotFound("webhook %s not found", id)
		}
		if err := tx.Emit(p.TenantID, event.WebhookDeleted{ID: id}); err != nil {
			return nil, err
		}
		return &webhooksv1.DeleteResponse{}, nil
	})
}

// Test sends one signed webhook.test event now and reports the endpoint's answer. The delivery
// happens before the call's (audit-only) transaction, so no database connection waits on the
// endpoint.
func (s *Service) Test(ctx context.Context, req *webhooksv1.TestRequest) (*webhooksv1.TestResponse, error) {
	id, err := apierr.ParseID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	w, err := db.New(s.pool).GetWebhook(ctx, db.GetWebhookParams{TenantID: p.TenantID, ID: id})
	if err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "webhook %s not found", id)
	}
	secret, err := webhook.OpenSecret(s.sealer, w.ID, w.SecretSealed)
	if err != nil {
		return nil, err
	}
	msgID := "evt_test_" + uuid.Must(uuid.NewV7()).String()
	test := event.WebhookTest{WebhookID: id}
	data, err := json.Marshal(test)
	if err != nil {
		return nil, fmt.Errorf("encode webhook.test data: %w", err)
	}
	body, err := webhook.Body(test.Type(), test.Subject(), time.Now(), data)
	if err != nil {
		return nil, err
	}
	r := webhook.Post(ctx, s.client, w.Url, secret, msgID, body, testTimeout)
	res := &webhooksv1.TestResponse{EventId: msgID, StatusCode: int32(r.StatusCode), Latency: durationpb.New(r.Latency)}
	if r.Err != nil {
		res.Error = r.Err.Error()
	}
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*webhooksv1.TestResponse, error) {
		tx.Target("webhook", id)
		return res, nil
	})
}

// eventData is the webhook.created event: never the secret, and the URL redacted (events reach
// every reader of the tenant's events and the log sink).
func eventData(w db.Webhook) event.WebhookCreated {
	return event.WebhookCreated{ID: w.ID, URL: webhook.RedactURL(w.Url), EventTypes: w.EventTypes, Description: w.Description}
}

// forCaller redacts w's URL unless the caller may change webhooks (webhooks.write: admins and
// owners); viewers and operators see its scheme and host only.
func forCaller(ctx context.Context, w *webhooksv1.Webhook) *webhooksv1.Webhook {
	if !auth.Caller(ctx).Can("webhooks.write") {
		w.Url = webhook.RedactURL(w.Url)
	}
	return w
}

func toProto(w db.GetWebhookRow) *webhooksv1.Webhook {
	out := &webhooksv1.Webhook{
		Id: w.ID.String(), TenantId: w.TenantID.String(), Url: w.Url, EventTypes: w.EventTypes,
		Description: w.Description, CreateTime: timestamppb.New(w.CreatedAt), LastError: w.LastError,
	}
	if w.LastErrorAt != nil {
		out.LastErrorTime = timestamppb.New(*w.LastErrorAt)
	}
	out.State, out.Failure = webhooksv1.WebhookState_WEBHOOK_STATE_HEALTHY, w.Failure
	if w.State == webhook.StateFailing {
		out.State = webhooksv1.WebhookState_WEBHOOK_STATE_FAILING
	}
	if w.FailingSince != nil {
		out.FailingSinceTime = timestamppb.New(*w.FailingSince)
	}
	out.DeadLetters, out.DeadLettersDropped = w.DeadLetters, w.DeadLettersDropped
	return out
}
