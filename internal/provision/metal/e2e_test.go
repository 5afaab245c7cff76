package metal

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	provisionmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1/provisionmodulev1connect"
	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/dbtest"
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

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestEndToEnd: with the provision module's API and controller (knowing the API's URL), a real
// gateway and sushy-tools' emulator, a machine of a redfish class claims a system, which the
// harness playing its operating system sees powered on with the class's image; it fetches the
// boot configuration the image's URL names, once, and joins with a FakeDaemon; the machine
// becomes ready. A second fetch is refused. Deleting it drains and retires the node, and leaves
// the system powered off, without media or boot override, and unclaimed.
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	em := startEmulator(t, 2)
	images := imageServer(t)
	pool := dbtest.Pool(t)
	ctx := t.Context()
	if err := migrate.ApplyAll(ctx, pool, slog.New(slog.DiscardHandler), []migrate.ModuleMigrations{{Name: modprovision.Name, FS: migrations.FS}}); err != nil {
		t.Fatal(err)
	}
	mod := modprovision.New(modprovision.Providers{Kind: Factory})
	cfg := mod.Config().(*modprovision.Config)
	cfg.Providers = []string{Kind}
	cfg.PollInterval = 100 * time.Millisecond
	cfg.AllowPrivateEndpoints = true // the emulator is on loopback
	if err := mod.Validate(); err != nil {
		t.Fatal(err)
	}
	api := servertest.Start(t, pool, func(o *server.Options) { o.Services = mod.Services() })
	client := provisionmodulev1connect.NewProvisionModuleServiceClient(api.HTTPClient(api.AdminKey), api.URL)
	gw := startGateway(t, api)
	ctl, err := modprovision.NewController(modprovision.ControllerOptions{
		Pool: pool, Secret: servertest.Secret, Config: *cfg, Providers: modprovision.Providers{Kind: Factory},
		GatewayEndpoint: gw, APIURL: api.URL,
	})
	if err != nil {
		t.Fatal(err)
	}
	workerstest.Run(t, workerstest.Options{
		Pool: pool, Roles: []string{workers.RoleControllers},
		Reconcilers: append(workerstest.NodeControl(pool, workerstest.NodeControlOptions{CommandPoll: 100 * time.Millisecond}), ctl.Registration()),
	})
	h := newMachines(t, em, images)
	h.run()

	params := testParams(em, images)
	st := &structpb.Struct{}
	if err := protojson.Unmarshal(params, st); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CreateClass(ctx, &provisionmodulev1.CreateClassRequest{Name: "metal", Provider: Kind, Params: st, Credentials: testCredentials}); err != nil {
		t.Fatal(err)
	}
	res, err := client.CreateMachine(ctx, &provisionmodulev1.CreateMachineRequest{Class: "metal", Name: "metal-1"})
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
		poll.Until(t, 90*time.Second, "machine "+state, func() bool { return machine().State == state },
			poll.Report(func() string { m := machine(); return "state " + m.State + ", reason " + m.Reason }))
	}
	await(modprovision.StateReady)
	m := machine()
	sys := strings.TrimPrefix(m.ProviderID[:strings.Index(m.ProviderID, "#")], em.URL+"/redfish/v1/Systems/")
	if m.NodeID == nil || !strings.HasSuffix(m.ProviderID, "#"+id.String()) {
		t.Fatalf("ready machine %+v: want its node and a provider id naming it", m)
	}
	h.mu.Lock()
	fetches, image := h.fetches[sys], h.booted[sys]
	h.mu.Unlock()
	if fetches != 1 {
		t.Fatalf("system %s fetched its boot configuration %d times, want once", sys, fetches)
	}
	p, err := Factory(params, testCredentials, testEgress)
	if err != nil {
		t.Fatal(err)
	}
	list, err := p.List(ctx)
	if err != nil || len(list) != 1 || list[0].Tags[provision.TagMachine] != id.String() || list[0].Tags[provision.TagDeployment] != "test.local" {
		t.Fatalf("List: %+v, %v; want the machine's system, of deployment test.local", list, err)
	}
	if _, err := fetchBootConfig(ctx, queryOf(t, image, "config"), queryOf(t, queryOf(t, image, "config"), "ticket")); err == nil ||
		!strings.Contains(err.Error(), "403") {
		t.Fatalf("second fetch of the boot configuration: %v, want refused", err)
	}

	if _, err := client.DeleteMachine(ctx, &provisionmodulev1.DeleteMachineRequest{Id: id.String()}); err != nil {
		t.Fatal(err)
	}
	await(modprovision.StateGone)
	em.awaitPower(t, sys, "Off")
	if s := em.state(t, sys); s.Inserted || s.Image != "" || s.Target != "None" {
		t.Fatalf("system %s after the machine is gone: %+v; want no media and no override", sys, s)
	}
	if list, err := p.List(ctx); err != nil || len(list) != 0 {
		t.Fatalf("List after the machine is gone: %+v, %v", list, err)
	}
}

// queryOf is a URL's query parameter.
func queryOf(t *testing.T, raw, key string) string {
	t.Helper()
	i := strings.Index(raw, "?")
	if i < 0 {
		t.Fatalf("%q has no query", raw)
	}
	v, err := url.ParseQuery(raw[i+1:])
	if err != nil {
		t.Fatal(err)
	}
	return v.Get(key)
}

// startGateway initialises the PKI (trust domain test.local) and runs a gateway on loopback TLS
// until the test ends; it returns the gateway's address.
func startGateway(t *testing.T, api *servertest.Env) string {
	t.Helper()
	return gatewaytest.NewSealed(t, api.Pool, servertest.Secret).StartGateway("gw1", func(o *gateway.Options) {
		o.DispatchInterval = 100 * time.Millisecond
	}).Addr
}
