package webhooks_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"

	eventsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/events/v1"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	webhooksv1 "github.com/better-compute/better-compute/gen/go/bettercompute/webhooks/v1"
	"github.com/better-compute/better-compute/server/servertest"
)

// TestViewerSeesRedactedURL: viewers see a webhook's scheme and host only, in webhooks/get and
// webhooks/list and in its events; admins see the whole URL.
func TestViewerSeesRedactedURL(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	admin := env.IAM(env.AdminKey)
	p, err := admin.CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_SERVICE_ACCOUNT, Name: "viewer"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateRoleBinding(ctx, &iamv1.CreateRoleBindingRequest{PrincipalId: p.GetPrincipal().GetId(), Role: iamv1.Role_ROLE_VIEWER}); err != nil {
		t.Fatal(err)
	}
	k, err := admin.CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: p.GetPrincipal().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	hooks, _ := clients(env, env.AdminKey)
	viewer, viewerEvents := clients(env, k.GetKey())

	const full = "https://hooks.example.com/in/s3cr3t-token?sig=abc"
	created, err := hooks.Create(ctx, &webhooksv1.CreateRequest{Url: full})
	if err != nil {
		t.Fatal(err)
	}
	id := created.GetWebhook().GetId()
	if got, err := hooks.Get(ctx, &webhooksv1.GetRequest{Id: id}); err != nil || got.GetWebhook().GetUrl() != full {
		t.Fatalf("admin get: %v (%v)", got, err)
	}
	const redacted = "https://hooks.example.com/[redacted]"
	if got, err := viewer.Get(ctx, &webhooksv1.GetRequest{Id: id}); err != nil || got.GetWebhook().GetUrl() != redacted {
		t.Fatalf("viewer get: %v (%v)", got, err)
	}
	if got, err := viewer.List(ctx, &webhooksv1.ListRequest{}); err != nil || len(got.GetWebhooks()) != 1 || got.GetWebhooks()[0].GetUrl() != redacted {
		t.Fatalf("viewer list: %v (%v)", got, err)
	}
	evs, err := viewerEvents.List(ctx, &eventsv1.ListRequest{Subject: "webhook/" + id})
	if err != nil || len(evs.GetEvents()) != 1 {
		t.Fatalf("events %v (%v)", evs, err)
	}
	if b, _ := evs.GetEvents()[0].GetData().MarshalJSON(); strings.Contains(string(b), "s3cr3t") || !strings.Contains(string(b), redacted) {
		t.Fatalf("event data %s", b)
	}
	// Viewers may list dead letters, not replay them.
	if _, err := viewer.ListDeadLetters(ctx, &webhooksv1.ListDeadLettersRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	_, err = viewer.ReplayDeadLetters(ctx, &webhooksv1.ReplayDeadLettersRequest{Id: id})
	wantCode(t, err, connect.CodePermissionDenied)
}
