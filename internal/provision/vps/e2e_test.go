package vps

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	"github.com/better-compute/better-compute/gen/db"
	provisionmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1/provisionmodulev1connect"
	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/migrate"
	modprovision "github.com/better-compute/better-compute/internal/modules/provision"
	"github.com/better-compute/better-compute/internal/modules/provision/migrations"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/provision"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
	"github.com/better-compute/better-compute/workers"
	"github.com/better-compute/better-compute/workers/workerstest"
)

func dbtestMain(m *testing.M) { dbtest.Main(m) }

func untaggedInstance() *ec2.RunInstancesInput {
	return &ec2.RunInstancesInput{ImageId: aws.String("ami-0123456789abcdef0"), MinCount: aws.Int32(1), MaxCount: aws.Int32(1)}
}

// TestEndToEnd: with the provision module's API and controller, a real gateway and moto, a
// machine of an ec2 class becomes an instance whose user data (read back from moto by the
// harness playing the instance) carries the token, gateway and root CA its FakeDaemon joins
// with; the machine becomes ready; deleting it drains and retires the node and terminates the
// instance.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	endpoint := startMoto(t)
	pool := dbtest.Pool(t)
	ctx := t.Context()
	if err := migrate.ApplyAll(ctx, pool, slog.New(slog.DiscardHandler), []migrate.ModuleMigrations{{Name: modprovision.Name, FS: migrations.FS}}); err != nil {
		t.Fatal(err)
	}
	mod := modprovision.New(modprovision.Providers{Kind: Factory})
	cfg := mod.Config().(*modprovision.Config)
	cfg.Providers = []string{Kind}
	cfg.PollInterval = 100 * time.Millisecond
	cfg.AllowPrivateEndpoints = true // moto is on loopback
	if err := mod.Validate(); err != nil {
		t.Fatal(err)
	}
	api := servertest.Start(t, pool, func(o *server.Options) { o.Services = mod.Services() })
	client := provisionmodulev1connect.NewProvisionModuleServiceClient(api.HTTPClient(api.AdminKey), api.URL)

	gw := startGateway(t, api)
	ctl, err := modprovision.NewController(modprovision.ControllerOptions{
		Pool: pool, Secret: servertest.Secret, Config: *cfg, Providers: modprovision.Providers{Kind: Factory}, GatewayEndpoint: gw,
	})
	if err != nil {
		t.Fatal(err)
	}
	workerstest.Run(t, workerstest.Options{
		Pool: pool, Roles: []string{workers.RoleControllers},
		Reconcilers: append(workerstest.NodeControl(pool, workerstest.NodeControlOptions{CommandPoll: 100 * time.Millisecond}), ctl.Registration()),
	})

	params := testParams(t, endpoint)
	raw, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	st := &structpb.Struct{}
	if err := protojson.Unmarshal(raw, st); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CreateClass(ctx, &provisionmodulev1.CreateClassRequest{Name: "vps", Provider: Kind, Params: st, Credentials: testCredentials}); err != nil {
		t.Fatal(err)
	}
	p := newProvider(t, params)
	newInstances(t, p).run()

	res, err := client.CreateMachine(ctx, &provisionmodulev1.CreateMachineRequest{Class: "vps", Name: "vps-1"})
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.MustParse(res.GetMachine().GetId())
	machine := func() provisiondb.ProvisionMachine {
		m, err := provisiondb.New(pool).GetMachineByID(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	await := func(state string) {
		poll.Until(t, 60*time.Second, "machine "+state, func() bool { return machine().State == state },
			poll.Report(func() string { m := machine(); return "state " + m.State + ", reason " + m.Reason }))
	}
	await(modprovision.StateReady)
	m := machine()
	inst, err := p.Get(ctx, m.ProviderID)
	if err != nil || inst.Tags[provision.TagMachine] != id.String() || inst.Tags[provision.TagDeployment] != "test.local" {
		t.Fatalf("instance %+v, %v: want running, tagged with machine %s in deployment test.local", inst, err, id)
	}
	if m.NodeID == nil {
		t.Fatal("a ready machine without its node")
	}

	if _, err := client.DeleteMachine(ctx, &provisionmodulev1.DeleteMachineRequest{Id: id.String()}); err != nil {
		t.Fatal(err)
	}
	await(modprovision.StateGone)
	node, err := db.New(pool).GetNodeForGateway(ctx, *m.NodeID)
	if err != nil {
		t.Fatal(err)
	}
	if node.State != fleet.StateRetired || node.RevokedAt == nil || node.Hostname != "vps-1" {
		t.Fatalf("node after delete: %s, revoked %v, hostname %q; want retired and revoked, vps-1", node.State, node.RevokedAt, node.Hostname)
	}
	if _, err := p.Get(ctx, m.ProviderID); err == nil {
		t.Fatalf("instance %s still there after the machine is gone", m.ProviderID)
	}
	if l, err := p.List(ctx); err != nil || len(l) != 0 {
		t.Fatalf("List after the machine is gone: %+v, %v", l, err)
	}
}

// startGateway initialises the PKI (trust domain test.local) and runs a gateway on loopback TLS
// until the test ends; it returns the gateway's address.
func startGateway(t *testing.T, api *servertest.Env) string {
	t.Helper()
	return gatewaytest.NewSealed(t, api.Pool, servertest.Secret).StartGateway("gw1", func(o *gateway.Options) {
		o.DispatchInterval = 100 * time.Millisecond
	}).Addr
}
