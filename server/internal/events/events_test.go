package events_test

import (
	"fmt"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	eventsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/events/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/events/v1/eventsv1connect"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestList(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	env := servertest.New(t)
	me, err := env.IAM(env.AdminKey).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	if err != nil {
		t.Fatal(err)
	}
	tenant := me.GetTenant().GetId()
	for i := range 5 {
		for _, tn := range []string{tenant, uuid.NewString()} {
			if _, err := env.Pool.Exec(ctx, `INSERT INTO outbox (tenant_id, type, subject, payload) VALUES ($1, $2, $3, $4)`,
				tn, fmt.Sprintf("thing.t%d", i%2), fmt.Sprintf("thing/%d", i), fmt.Sprintf(`{"n": %d, "tags": ["a"], "ok": true}`, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	c := eventsv1connect.NewEventsServiceClient(env.HTTPClient(env.AdminKey), env.URL)

	var got []*eventsv1.Event
	tok := ""
	for {
		res, err := c.List(ctx, &eventsv1.ListRequest{PageSize: 2, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, res.GetEvents()...)
		if tok = res.GetNextPageToken(); tok == "" {
			break
		}
	}
	if len(got) != 5 {
		t.Fatalf("listed %d events, want the tenant's 5", len(got))
	}
	for i, e := range got {
		n := 4 - i // newest first
		if e.GetTenantId() != tenant || e.GetSubject() != fmt.Sprintf("thing/%d", n) || e.GetData().GetStructValue().GetFields()["n"].GetNumberValue() != float64(n) {
			t.Fatalf("event %d: %v", i, e)
		}
	}
	odd, err := c.List(ctx, &eventsv1.ListRequest{Type: "thing.t1"})
	if err != nil || len(odd.GetEvents()) != 2 {
		t.Fatalf("type filter: %v %v", odd, err)
	}
	one, err := c.List(ctx, &eventsv1.ListRequest{Subject: "thing/3"})
	if err != nil || len(one.GetEvents()) != 1 || one.GetEvents()[0].GetType() != "thing.t1" {
		t.Fatalf("subject filter: %v %v", one, err)
	}
	_, err = c.List(ctx, &eventsv1.ListRequest{PageToken: "garbage"})
	if connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("bad token: %v", err)
	}
}
