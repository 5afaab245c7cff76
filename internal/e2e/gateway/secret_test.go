package gateway_test

import (
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	secretsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/secrets/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/secrets/v1/secretsv1connect"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

// TestSecret drives DaemonService.Secret end to end: secrets made with secrets/create, granted
// with nodes/updateSpec, fetched by a FakeDaemon over its mTLS client certificate from a real
// gateway; then nodes/revoke.
func TestSecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The API seals with the gateways' deployment secret, as every process of a deployment does.
	api := servertest.Start(t, e.pool, func(o *server.Options) { o.Secret = gatewaytest.Secret })
	secrets := secretsv1connect.NewSecretsServiceClient(api.HTTPClient(api.AdminKey), api.URL)
	nodes := nodesv1connect.NewNodesServiceClient(api.HTTPClient(api.AdminKey), api.URL)
	other, err := api.IAM(api.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	otherSecrets := secretsv1connect.NewSecretsServiceClient(api.HTTPClient(other.GetOwnerApiKey()), api.URL)

	create := func(c secretsv1connect.SecretsServiceClient, name, value string) {
		t.Helper()
		if _, err := c.Create(ctx, &secretsv1.CreateRequest{Name: name, Value: []byte(value)}); err != nil {
			t.Fatal(err)
		}
	}
	create(secrets, "db/password", "root-db-password")
	create(secrets, "api-token", "root-api-token")
	create(otherSecrets, "db/password", "other-db-password")
	create(otherSecrets, "other-only", "other-only-value")

	gw := e.startGateway("gw1")
	f := e.startFake(gw.addr, e.token(1, time.Now().Add(time.Hour)))
	nodeID := f.Status().NodeID

	// Nothing is granted by the initial spec.
	_, err = f.Secret(ctx, "db/password")
	wantCode(t, err, connect.CodeNotFound)

	if _, err := nodes.UpdateSpec(ctx, &nodesv1.UpdateSpecRequest{Id: nodeID, Spec: &nodesv1.NodeSpec{
		Secrets: []string{"db/password", "missing", "other-only", "db/password"},
	}}); err != nil {
		t.Fatal(err)
	}
	got, err := nodes.Get(ctx, &nodesv1.GetRequest{Id: nodeID})
	if err != nil {
		t.Fatal(err)
	}
	if s := got.GetNode().GetSpec().GetSecrets(); len(s) != 3 || s[0] != "db/password" || s[1] != "missing" || s[2] != "other-only" {
		t.Fatalf("spec secrets %v", s)
	}

	// Granted: the value of the node's own tenant's secret, not the other tenant's of that name.
	v, err := f.Secret(ctx, "db/password")
	if err != nil || string(v) != "root-db-password" {
		t.Fatalf("granted secret: %q, %v", v, err)
	}
	// Not granted, granted but missing, and another tenant's: the same NotFound.
	var messages []string
	for _, name := range []string{"api-token", "missing", "other-only"} {
		_, err := f.Secret(ctx, name)
		wantCode(t, err, connect.CodeNotFound)
		var cerr *connect.Error
		if !errors.As(err, &cerr) {
			t.Fatalf("%T %v", err, err)
		}
		messages = append(messages, cerr.Message())
	}
	for i, m := range messages {
		if want := `secret "` + []string{"api-token", "missing", "other-only"}[i] + `" is not granted to this node`; m != want {
			t.Errorf("message %q, want %q (one answer for every refusal)", m, want)
		}
	}
	_, err = f.Secret(ctx, "not a name")
	wantCode(t, err, connect.CodeInvalidArgument)
	// Without a client certificate there is no node to grant anything to.
	_, err = anonymous(gw.addr, e.bundle.RootPEM()).Secret(ctx, &daemonv1.SecretRequest{Name: "db/password"})
	wantCode(t, err, connect.CodeUnauthenticated)

	// A new value is what the node gets next; a deleted secret is not found.
	if _, err := secrets.Update(ctx, &secretsv1.UpdateRequest{Name: "db/password", Value: []byte("rotated")}); err != nil {
		t.Fatal(err)
	}
	if v, err := f.Secret(ctx, "db/password"); err != nil || string(v) != "rotated" {
		t.Fatalf("after update: %q, %v", v, err)
	}
	// A gateway without the sealer cannot hand secrets out.
	bare := e.StartGateway("gw-bare", func(o *gateway.Options) { o.Secrets = nil })
	rawFake := e.startFake(bare.Addr, e.token(1, time.Now().Add(time.Hour)))
	_, err = rawFake.Secret(ctx, "db/password")
	wantCode(t, err, connect.CodeUnavailable)

	if _, err := secrets.Delete(ctx, &secretsv1.DeleteRequest{Name: "db/password"}); err != nil {
		t.Fatal(err)
	}
	_, err = f.Secret(ctx, "db/password")
	wantCode(t, err, connect.CodeNotFound)
	create(secrets, "db/password", "recreated")
	if v, err := f.Secret(ctx, "db/password"); err != nil || string(v) != "recreated" {
		t.Fatalf("after re-creation: %q, %v", v, err)
	}

	// A revoked node is refused, even for a secret its spec names.
	if _, err := nodes.Revoke(ctx, &nodesv1.RevokeRequest{Id: nodeID}); err != nil {
		t.Fatal(err)
	}
	_, err = f.Secret(ctx, "db/password")
	wantCode(t, err, connect.CodePermissionDenied)
}

func wantCode(t *testing.T, err error, code connect.Code) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Fatalf("error = %v, want code %v", err, code)
	}
}
