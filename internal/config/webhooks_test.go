package config

import (
	"slices"
	"testing"
	"time"
)

// TestWebhookRetry: webhooks.retry defaults to about an hour of retries, is read from the file
// and the environment, and out-of-range values are problems naming their key.
func TestWebhookRetry(t *testing.T) {
	t.Parallel()
	c, err := load(t, "", withSecret())
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Webhooks.Retry; r.MinBackoff != 500*time.Millisecond || r.MaxBackoff != 5*time.Minute || r.GiveUpAfter != time.Hour || r.MaxDeadLetters != 10000 {
		t.Errorf("defaults %+v", r)
	}
	c, err = load(t, "webhooks:\n  retry:\n    minBackoff: 1s\n    giveUpAfter: 30m\n", withSecret("BETTER_COMPUTE_WEBHOOKS_RETRY_MAX_DEAD_LETTERS=50"))
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Webhooks.Retry; r.MinBackoff != time.Second || r.MaxBackoff != 5*time.Minute || r.GiveUpAfter != 30*time.Minute || r.MaxDeadLetters != 50 {
		t.Errorf("configured %+v", r)
	}

	for _, tc := range []struct {
		set  func(*WebhookRetry)
		want string
	}{
		{func(r *WebhookRetry) { r.MinBackoff = time.Millisecond }, "webhooks.retry.minBackoff"},
		{func(r *WebhookRetry) { r.MaxBackoff = 100 * time.Millisecond }, "webhooks.retry.maxBackoff"},
		{func(r *WebhookRetry) { r.MaxBackoff = 2 * time.Hour }, "webhooks.retry.maxBackoff"},
		{func(r *WebhookRetry) { r.GiveUpAfter = 0 }, "webhooks.retry.giveUpAfter"},
		{func(r *WebhookRetry) { r.GiveUpAfter = 30 * 24 * time.Hour }, "webhooks.retry.giveUpAfter"},
		{func(r *WebhookRetry) { r.MaxDeadLetters = 0 }, "webhooks.retry.maxDeadLetters"},
		{func(r *WebhookRetry) { r.MaxDeadLetters = 2_000_000 }, "webhooks.retry.maxDeadLetters"},
	} {
		c, err := load(t, "", withSecret())
		if err != nil {
			t.Fatal(err)
		}
		tc.set(&c.Webhooks.Retry)
		if keys := problemKeys(t, c.Validate()); !slices.Equal(keys, []string{tc.want}) {
			t.Errorf("%+v: problems %q, want [%s]", c.Webhooks.Retry, keys, tc.want)
		}
	}
}
