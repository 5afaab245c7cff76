package doctor_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/doctor"
)

// TestReportsFailingWebhooks: a webhook whose retries ran out is a warning naming it, its tenant
// and how many events it has parked; replayed (healthy), it is not.
func TestReportsFailingWebhooks(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	q := db.New(pool)
	tenant := uuid.New()
	if _, err := pool.Exec(ctx, `INSERT INTO tenants (id, name, is_root) VALUES ($1, 'root', true)`, tenant); err != nil {
		t.Fatal(err)
	}
	id := uuid.Must(uuid.NewV7())
	if _, err := q.CreateWebhook(ctx, db.CreateWebhookParams{ID: id, TenantID: tenant, Url: "https://example.com/in/token", EventTypes: []string{}, SecretSealed: []byte{0}}); err != nil {
		t.Fatal(err)
	}
	check := func() doctor.Finding {
		t.Helper()
		fs, err := doctor.Run(ctx, doctor.Options{Pool: pool})
		if err != nil {
			t.Fatal(err)
		}
		return find(t, fs, "failing webhooks")
	}
	if f := check(); f.Severity != doctor.OK {
		t.Fatalf("healthy webhook: %+v", f)
	}

	if err := q.MarkWebhookFailing(ctx, db.MarkWebhookFailingParams{ID: id, Failure: "endpoint answered 500 Internal Server Error"}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.ParkDeadLetters(ctx, db.ParkDeadLettersParams{
		WebhookID: id, TenantID: tenant, OutboxIds: []int64{1, 2}, Types: []string{"a", "a"}, Subjects: []string{"s", "s"},
		Payloads: [][]byte{[]byte(`{}`), []byte(`{}`)}, CreatedAts: make([]time.Time, 2),
	}); err != nil {
		t.Fatal(err)
	}
	f := check()
	if f.Severity != doctor.Warning || !strings.Contains(f.Cause, id.String()) || !strings.Contains(f.Cause, tenant.String()) ||
		!strings.Contains(f.Cause, "2 events parked") || !strings.Contains(f.Cause, "500") || strings.Contains(f.Cause, "token") || f.Fix == "" {
		t.Fatalf("failing webhook: %+v", f)
	}

	if _, err := q.MarkWebhookHealthy(ctx, db.MarkWebhookHealthyParams{TenantID: tenant, ID: id}); err != nil {
		t.Fatal(err)
	}
	if f := check(); f.Severity != doctor.OK {
		t.Fatalf("replayed webhook: %+v", f)
	}
}
