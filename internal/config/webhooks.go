package config

import "time"

// WebhookRetry is the bounded retry schedule of webhook deliveries (webhooks.retry). A failed
// delivery is retried after a wait that doubles from MinBackoff up to MaxBackoff (with jitter, or
// the endpoint's Retry-After up to MaxBackoff); once a webhook's run of failures has lasted
// GiveUpAfter, it is marked failing and its undelivered events, and then every new one, are
// parked as dead letters (at most MaxDeadLetters per webhook, the oldest dropped and counted)
// until webhooks/replayDeadLetters. So one broken endpoint never holds the outbox, whose
// retention then prunes by the healthy sinks.
type WebhookRetry struct {
	// MinBackoff is the first wait (default 500ms), from 10ms to MaxBackoff.
	MinBackoff time.Duration `yaml:"minBackoff"`
	// MaxBackoff is the longest wait (default 5m), at most GiveUpAfter.
	MaxBackoff time.Duration `yaml:"maxBackoff"`
	// GiveUpAfter is how long a run of failures lasts before the webhook is marked failing
	// (default 1h), from 1s to 168h.
	GiveUpAfter time.Duration `yaml:"giveUpAfter"`
	// MaxDeadLetters caps each webhook's parked events (default 10000), from 1 to 1000000.
	MaxDeadLetters int `yaml:"maxDeadLetters"`
}

// Bounds of webhooks.retry.
const (
	minWebhookBackoff     = 10 * time.Millisecond
	minWebhookGiveUp      = time.Second
	maxWebhookGiveUp      = 7 * 24 * time.Hour
	maxWebhookDeadLetters = 1_000_000
)

// defaultWebhookRetry retries for about an hour (some 20 attempts) before giving up.
func defaultWebhookRetry() WebhookRetry {
	return WebhookRetry{
		MinBackoff:     500 * time.Millisecond,
		MaxBackoff:     5 * time.Minute,
		GiveUpAfter:    time.Hour,
		MaxDeadLetters: 10_000,
	}
}

func (c *Config) checkWebhookRetry(ps *problems) {
	r := c.Webhooks.Retry
	if r.MinBackoff < minWebhookBackoff {
		ps.add("webhooks.retry.minBackoff", "must be at least %s, got %s", minWebhookBackoff, r.MinBackoff)
	}
	if r.MaxBackoff < r.MinBackoff {
		ps.add("webhooks.retry.maxBackoff", "must be at least webhooks.retry.minBackoff (%s), got %s", r.MinBackoff, r.MaxBackoff)
	}
	if r.GiveUpAfter < minWebhookGiveUp || r.GiveUpAfter > maxWebhookGiveUp {
		ps.add("webhooks.retry.giveUpAfter", "must be from %s to %s, got %s", minWebhookGiveUp, maxWebhookGiveUp, r.GiveUpAfter)
	} else if r.MaxBackoff > r.GiveUpAfter {
		ps.add("webhooks.retry.maxBackoff", "must be at most webhooks.retry.giveUpAfter (%s), got %s", r.GiveUpAfter, r.MaxBackoff)
	}
	if r.MaxDeadLetters < 1 || r.MaxDeadLetters > maxWebhookDeadLetters {
		ps.add("webhooks.retry.maxDeadLetters", "must be from 1 to %d, got %d", maxWebhookDeadLetters, r.MaxDeadLetters)
	}
}
