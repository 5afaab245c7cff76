package sinks

import (
	"context"
	mrand "math/rand/v2"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/internal/webhook"
)

// Webhook is what a webhook sink needs of a webhooks row.
type Webhook struct {
	ID         uuid.UUID
	TenantID   uuid.UUID
	URL        string
	EventTypes []string
	// Secret is the signing secret, "whsec_…".
	Secret string
}

// WebhookSink delivers a tenant's events to one of its webhooks.
type WebhookSink struct {
	hook    Webhook
	key     webhook.Key
	client  *http.Client
	timeout time.Duration
}

// NewWebhookSink returns the sink of hook, which sends with client (see webhook.NewClient) and gives
// each attempt timeout.
func NewWebhookSink(hook Webhook, client *http.Client, timeout time.Duration) (*WebhookSink, error) {
	key, err := webhook.ParseSecret(hook.Secret)
	if err != nil {
		return nil, err
	}
	if timeout <= 0 {
		timeout = 15 * time.Second
	}
	return &WebhookSink{hook: hook, key: key, client: client, timeout: timeout}, nil
}

// Name is "webhook:<id>".
func (w *WebhookSink) Name() string { return webhook.SinkName(w.hook.ID) }

// Source is the webhook's tenant and event types.
func (w *WebhookSink) Source() Source {
	return Source{Tenant: &w.hook.TenantID, Types: w.hook.EventTypes}
}

// Deliver posts the event and succeeds on a 2xx answer.
func (w *WebhookSink) Deliver(ctx context.Context, e Event) error {
	body, err := webhook.Body(e.Type, e.Subject, e.CreatedAt, e.Payload)
	if err != nil {
		return err
	}
	return w.key.Post(ctx, w.client, w.hook.URL, e.MessageID(), body, w.timeout).Err
}

// backoff is the wait after the n-th consecutive failure (n >= 1): min doubled n-1 times, at
// most max, then spread over its upper half at random.
func backoff(minWait, maxWait time.Duration, n int) time.Duration {
	d := minWait
	for i := 1; i < n && d < maxWait; i++ {
		d *= 2
	}
	d = min(d, maxWait)
	return d/2 + mrand.N(d/2+1)
}
