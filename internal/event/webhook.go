package event

import "github.com/google/uuid"

// webhookSubject is the subject of a webhook's events.
func webhookSubject(id uuid.UUID) string { return "webhook/" + id.String() }

// WebhookCreated is emitted by webhooks/create. It never carries the signing secret.
type WebhookCreated struct {
	// ID is the webhook's id.
	ID uuid.UUID `json:"id"`
	// URL is the endpoint, redacted to its scheme and host (events reach every reader of the
	// tenant's events).
	URL string `json:"url"`
	// EventTypes are the types delivered to it; empty means every type.
	EventTypes []string `json:"eventTypes"`
	// Description is the webhook's description.
	Description string `json:"description"`
}

// Type is "webhook.created".
func (WebhookCreated) Type() string { return "webhook.created" }

// Subject is "webhook/<id>".
func (e WebhookCreated) Subject() string { return webhookSubject(e.ID) }

// WebhookDeleted is emitted by webhooks/delete.
type WebhookDeleted struct {
	// ID is the webhook's id.
	ID uuid.UUID `json:"id"`
}

// Type is "webhook.deleted".
func (WebhookDeleted) Type() string { return "webhook.deleted" }

// Subject is "webhook/<id>".
func (e WebhookDeleted) Subject() string { return webhookSubject(e.ID) }

// WebhookReplayed is emitted by webhooks/replayDeadLetters: the webhook's parked events are
// queued for delivery again.
type WebhookReplayed struct {
	// ID is the webhook's id.
	ID uuid.UUID `json:"id"`
	// Queued is how many parked events were queued.
	Queued int64 `json:"queued"`
}

// Type is "webhook.replayed".
func (WebhookReplayed) Type() string { return "webhook.replayed" }

// Subject is "webhook/<id>".
func (e WebhookReplayed) Subject() string { return webhookSubject(e.ID) }

// WebhookFailing is emitted by the sinks role when a webhook's retry schedule runs out: the
// webhook is marked failing and its events are parked as dead letters. Other webhooks of the
// tenant receive it.
type WebhookFailing struct {
	// ID is the webhook's id.
	ID uuid.UUID `json:"id"`
	// URL is the endpoint, redacted to its scheme and host.
	URL string `json:"url"`
	// Error is the last delivery's failure.
	Error string `json:"error"`
}

// Type is "webhook.failing".
func (WebhookFailing) Type() string { return "webhook.failing" }

// Subject is "webhook/<id>".
func (e WebhookFailing) Subject() string { return webhookSubject(e.ID) }

// WebhookTest is sent by webhooks/test straight to the one webhook, whatever its event types;
// it is never written to the outbox, so events/list and other webhooks do not see it.
type WebhookTest struct {
	// WebhookID is the tested webhook's id.
	WebhookID uuid.UUID `json:"webhookId"`
}

// Type is "webhook.test".
func (WebhookTest) Type() string { return "webhook.test" }

// Subject is "webhook/<id>".
func (e WebhookTest) Subject() string { return webhookSubject(e.WebhookID) }
