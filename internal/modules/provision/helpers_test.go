package provision

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/gateway/gatewaytest"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	provisionmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1/provisionmodulev1connect"
	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/migrate"
	"github.com/better-compute/better-compute/internal/modules/provision/migrations"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/provision"
	"github.com/better-compute/better-compute/internal/provision/simprovider"
	"github.com/better-compute/better-compute/internal/reconcile"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
	"github.com/better-compute/better-compute/workers"
	"github.com/better-compute/better-compute/workers/workerstest"
)

func TestMain(m *testing.M) {
	if os.Getenv(killChildEnv) != "" { // the controller's process of TestKilledControllerAtEveryStep
		os.Exit(runKillChild())
	}
	dbtest.Main(m)
}

// env is the API with the module's service on a fresh database, with the module's migrations,
// a sim cloud and a client of the root tenant's admin.
type env struct {
	*servertest.Env
	mod    *Module
	cloud  *simprovider.Cloud
	client provisionmodulev1connect.ProvisionModuleServiceClient
	// gateway is the loopback gateway's address, once startGateway ran.
	gateway string
}

// newEnv starts the API. extra providers are enabled beside "sim"; configure changes the
// module's configuration before the API starts.
func newEnv(t *testing.T, extra Providers, configure ...func(*Config)) *env {
	t.Helper()
	pool := dbtest.Pool(t)
	if err := migrate.ApplyAll(t.Context(), pool, slog.New(slog.DiscardHandler), []migrate.ModuleMigrations{{Name: Name, FS: migrations.FS}}); err != nil {
		t.Fatal(err)
	}
	cloud := simprovider.New(simprovider.Options{})
	t.Cleanup(cloud.Close)
	providers := Providers{simprovider.Kind: cloud.Factory}
	for k, f := range extra {
		providers[k] = f
	}
	m := New(providers)
	m.cfg.Providers = []string{simprovider.Kind}
	for k := range extra {
		m.cfg.Providers = append(m.cfg.Providers, k)
	}
	m.cfg.PollInterval = 100 * time.Millisecond
	m.cfg.MaxMachinesPerTenant = 3
	for _, f := range configure {
		f(&m.cfg)
	}
	api := servertest.Start(t, pool, func(o *server.Options) { o.Services = m.Services() })
	return &env{Env: api, mod: m, cloud: cloud, client: clientFor(api, api.AdminKey)}
}

func clientFor(api *servertest.Env, key string) provisionmodulev1connect.ProvisionModuleServiceClient {
	return provisionmodulev1connect.NewProvisionModuleServiceClient(api.HTTPClient(key), api.URL)
}

// childTenant creates a tenant under the root and returns its owner's client.
func (e *env) childTenant(t *testing.T, name string) provisionmodulev1connect.ProvisionModuleServiceClient {
	t.Helper()
	res, err := e.IAM(e.AdminKey).CreateTenant(t.Context(), &iamv1.CreateTenantRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return clientFor(e.Env, res.GetOwnerApiKey())
}

// startGateway initialises the PKI and runs a gateway on loopback TLS until the test ends.
func (e *env) startGateway(t *testing.T) {
	t.Helper()
	gw := gatewaytest.NewSealed(t, e.Pool, servertest.Secret).StartGateway("gw1", func(o *gateway.Options) {
		o.DispatchInterval = 100 * time.Millisecond
	})
	// The sim machines stop before the gateway (cleanups run last first), so their daemons do
	// not retry against it.
	t.Cleanup(e.cloud.Close)
	e.gateway = gw.Addr
}

// controller is a lifecycle controller over the env's database and the given providers (the
// module's when nil), as a new process would make it.
func (e *env) controller(t *testing.T, providers Providers) *Controller {
	t.Helper()
	if providers == nil {
		providers = e.mod.enabled()
	}
	c, err := NewController(ControllerOptions{
		Pool: e.Pool, Secret: servertest.Secret, Config: e.mod.cfg, Providers: providers, GatewayEndpoint: e.gateway,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// runWorkers runs the controllers role with regs and the node controllers (which drain nodes)
// until the test ends.
func (e *env) runWorkers(t *testing.T, regs ...reconcile.Registration) {
	t.Helper()
	workerstest.Run(t, workerstest.Options{
		Pool: e.Pool, Roles: []string{workers.RoleControllers},
		Reconcilers: append(workerstest.NodeControl(e.Pool, workerstest.NodeControlOptions{CommandPoll: 100 * time.Millisecond}), regs...),
	})
}

// simClass creates a sim class named name.
func (e *env) simClass(t *testing.T, name string) {
	t.Helper()
	if _, err := e.client.CreateClass(t.Context(), &provisionmodulev1.CreateClassRequest{Name: name, Provider: simprovider.Kind}); err != nil {
		t.Fatal(err)
	}
}

// createMachine asks for a machine and returns its id.
func (e *env) createMachine(t *testing.T, class, name string) uuid.UUID {
	t.Helper()
	res, err := e.client.CreateMachine(t.Context(), &provisionmodulev1.CreateMachineRequest{Class: class, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return uuid.MustParse(res.GetMachine().GetId())
}

// machine reads a machine from the database.
func (e *env) machine(t *testing.T, id uuid.UUID) provisiondb.ProvisionMachine {
	t.Helper()
	m, err := provisiondb.New(e.Pool).GetMachineByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// steps are the states of a machine's recorded steps, in order.
func (e *env) steps(t *testing.T, id uuid.UUID) []string {
	t.Helper()
	rows, err := provisiondb.New(e.Pool).ListMachineSteps(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.State
	}
	return out
}

// awaitState waits for a machine to reach state.
func (e *env) awaitState(t *testing.T, id uuid.UUID, state string, within time.Duration) {
	t.Helper()
	poll.Until(t, within, "machine "+id.String()+" "+state, func() bool { return e.machine(t, id).State == state },
		poll.Report(func() string {
			m := e.machine(t, id)
			return "state " + m.State + ", reason " + m.Reason
		}))
}

// wantCode fails unless err is a Connect error with code.
func wantCode(t *testing.T, err error, code connect.Code, what string) {
	t.Helper()
	if connect.CodeOf(err) != code {
		t.Fatalf("%s: got %v, want %v", what, err, code)
	}
}

// errCrash is what a crashing provider returns: the process died around the provider's call.
var errCrash = errors.New("crashed")

// crashing wraps a provider: once, at the call named at, it fails as a process killed just
// before (after=false) or just after (after=true) the provider acted.
type crashing struct {
	provision.Provider
	at    string
	after bool
	once  *sync.Once
}

func (c crashing) crash(call string, act func() error) error {
	if call != c.at {
		return act()
	}
	fired := false
	c.once.Do(func() { fired = true })
	if !fired {
		return act()
	}
	if c.after {
		if err := act(); err != nil {
			return err
		}
	}
	return errCrash
}

func (c crashing) Create(ctx context.Context, req provision.CreateRequest) (provision.Machine, error) {
	var m provision.Machine
	err := c.crash("create", func() (err error) { m, err = c.Provider.Create(ctx, req); return err })
	return m, err
}

func (c crashing) Delete(ctx context.Context, id string) error {
	return c.crash("delete", func() error { return c.Provider.Delete(ctx, id) })
}

func (c crashing) List(ctx context.Context) ([]provision.Machine, error) {
	var ms []provision.Machine
	err := c.crash("list", func() (err error) { ms, err = c.Provider.List(ctx); return err })
	return ms, err
}
