package events

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	eventsmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/events/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/modules/events/v1/eventsmodulev1connect"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/webhook"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

// TestStatusAPI: GetStatus through the real API gives each tenant its own subject filter and
// the newest of its own events published, the servers without credentials, and the sink's
// count; without a key it is refused.
func TestStatusAPI(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool, _ := migratedPool(t)
	n := startNATS(t)
	m := testModule(strings.Replace(n.url(), "nats://", "nats://alice:pa55word@", 1))
	env := servertest.Start(t, pool, func(o *server.Options) { o.Services = m.Services() })
	child, err := env.IAM(env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	me, err := env.IAM(env.AdminKey).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	if err != nil {
		t.Fatal(err)
	}
	root, acme := uuid.MustParse(me.GetTenant().GetId()), uuid.MustParse(child.GetTenant().GetId())
	status := func(key string) *eventsmodulev1.GetStatusResponse {
		t.Helper()
		res, err := eventsmodulev1connect.NewEventsModuleServiceClient(env.HTTPClient(key), env.URL).GetStatus(ctx, &eventsmodulev1.GetStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	before := status(child.GetOwnerApiKey())
	if before.GetSubjectFilter() != "bc."+acme.String()+".>" || before.GetStream() != "BC_EVENTS" || before.GetPublished() != 0 ||
		before.GetLastEventId() != "" || before.GetUpdateTime() != nil || len(before.GetServers()) != 1 || before.GetServers()[0] != n.url() {
		t.Fatalf("before publishing: %v", before)
	}

	runSinks(t, pool, m)
	burst(t, pool, []uuid.UUID{root, acme}, 10, 100)
	var total int64
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox`).Scan(&total); err != nil {
		t.Fatal(err)
	}
	newest := func(tenant uuid.UUID) string {
		var id int64
		if err := pool.QueryRow(ctx, `SELECT max(id) FROM outbox WHERE tenant_id = $1`, tenant).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return webhook.EventID(id)
	}
	var got *eventsmodulev1.GetStatusResponse
	poll.Until(t, 60*time.Second, "the root tenant's events published", func() bool {
		got = status(env.AdminKey)
		return got.GetLastEventId() == newest(root) && got.GetPublished() >= 100
	}, poll.Every(50*time.Millisecond))
	if got.GetSubjectFilter() != "bc."+root.String()+".>" || got.GetLastError() != "" || got.GetUpdateTime() == nil ||
		got.GetPublished() > total {
		t.Fatalf("root status %v (%d events in the outbox)", got, total)
	}
	other := status(child.GetOwnerApiKey())
	if other.GetSubjectFilter() != "bc."+acme.String()+".>" || other.GetLastEventId() != newest(acme) || strings.Contains(other.String(), root.String()) {
		t.Fatalf("acme's status %v", other)
	}
	for _, s := range []*eventsmodulev1.GetStatusResponse{got, other} {
		if strings.Contains(s.String(), "pa55word") || strings.Contains(s.String(), "alice") {
			t.Fatalf("status shows the credentials: %v", s)
		}
	}

	_, err = eventsmodulev1connect.NewEventsModuleServiceClient(env.HTTPClient(""), env.URL).GetStatus(context.Background(), &eventsmodulev1.GetStatusRequest{})
	if ce, ok := errors.AsType[*connect.Error](err); !ok || ce.Code() != connect.CodeUnauthenticated {
		t.Fatalf("without a key: %v", err)
	}
}
