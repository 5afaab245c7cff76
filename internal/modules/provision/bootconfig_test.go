package provision

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/structpb"

	provisionmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1/provisionmodulev1connect"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/provision"
	"github.com/better-compute/better-compute/internal/provision/simprovider"
	"github.com/better-compute/better-compute/server/servertest"
)

// recording is a provider that remembers the boot configuration URL of each Create.
type recording struct {
	provision.Provider
	mu   *sync.Mutex
	urls map[string]string
}

func (r recording) Create(ctx context.Context, req provision.CreateRequest) (provision.Machine, error) {
	r.mu.Lock()
	r.urls[req.ClientToken] = req.Join.BootConfigURL
	r.mu.Unlock()
	return r.Provider.Create(ctx, req)
}

func (r recording) url(id uuid.UUID) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.urls[id.String()]
}

// bootEnv runs the controller with the API's URL, its sim provider recording the boot
// configuration URLs, and a sim class "small" whose machines never join (a long boot delay).
func bootEnv(t *testing.T) (*env, recording) {
	t.Helper()
	e := newEnv(t, nil)
	e.startGateway(t)
	rec := recording{mu: &sync.Mutex{}, urls: map[string]string{}}
	sim := e.mod.enabled()[simprovider.Kind]
	providers := Providers{simprovider.Kind: func(params json.RawMessage, creds []byte, egress provision.Egress) (provision.Provider, error) {
		p, err := sim(params, creds, egress)
		return recording{Provider: p, mu: rec.mu, urls: rec.urls}, err
	}}
	c, err := NewController(ControllerOptions{
		Pool: e.Pool, Secret: servertest.Secret, Config: e.mod.cfg, Providers: providers, GatewayEndpoint: e.gateway, APIURL: e.URL,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.runWorkers(t, c.Registration())
	return e, rec
}

// bootClient is a client without a credential, as a booting machine has.
func bootClient(e *env) provisionmodulev1connect.ProvisionModuleServiceClient {
	return provisionmodulev1connect.NewProvisionModuleServiceClient(http.DefaultClient, e.URL)
}

// awaitBootURL creates a machine of the class "slow" and waits for its boot configuration URL.
func awaitBootURL(t *testing.T, e *env, rec recording, client provisionmodulev1connect.ProvisionModuleServiceClient, name string) (uuid.UUID, string) {
	t.Helper()
	res, err := client.CreateMachine(t.Context(), &provisionmodulev1.CreateMachineRequest{Class: "slow", Name: name})
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.MustParse(res.GetMachine().GetId())
	poll.Until(t, 30*time.Second, "the boot configuration URL of "+name, func() bool { return rec.url(id) != "" })
	u, err := url.Parse(rec.url(id))
	if err != nil || !strings.HasPrefix(rec.url(id), e.URL+bootConfigRoute+"?ticket=") {
		t.Fatalf("boot configuration URL %q: want %s%s?ticket=…", rec.url(id), e.URL, bootConfigRoute)
	}
	return id, u.Query().Get("ticket")
}

// TestBootConfig: the controller hands the provider a URL whose ticket returns the machine's
// join token, the gateway and the root CA to the first fetch only; a second fetch, a wrong
// ticket, another machine's id with this ticket's secret, and an expired ticket are refused.
func TestBootConfig(t *testing.T) {
	t.Parallel()
	e, rec := bootEnv(t)
	slowClass(t, e, e.client)
	boot := bootClient(e)
	ctx := t.Context()

	id, ticket := awaitBootURL(t, e, rec, e.client, "b1")
	res, err := boot.BootConfig(ctx, &provisionmodulev1.BootConfigRequest{Ticket: ticket})
	if err != nil {
		t.Fatal(err)
	}
	m := e.machine(t, id)
	if res.GetMachineId() != id.String() || res.GetName() != "b1" || res.GetGatewayEndpoint() != e.gateway ||
		!strings.HasPrefix(res.GetJoinToken(), "bcj_"+*m.JoinTokenID+"_") || !strings.Contains(res.GetRootCaPem(), "BEGIN CERTIFICATE") {
		t.Fatalf("boot configuration %v: want machine %s's token, gateway %s and the root CA", res, id, e.gateway)
	}
	_, err = boot.BootConfig(ctx, &provisionmodulev1.BootConfigRequest{Ticket: ticket})
	wantCode(t, err, connect.CodePermissionDenied, "second fetch")

	id2, ticket2 := awaitBootURL(t, e, rec, e.client, "b2")
	wrong := ticket2[:len(ticket2)-2] + "AA"
	if wrong == ticket2 {
		wrong = ticket2[:len(ticket2)-2] + "BB"
	}
	_, err = boot.BootConfig(ctx, &provisionmodulev1.BootConfigRequest{Ticket: wrong})
	wantCode(t, err, connect.CodePermissionDenied, "wrong secret")
	_, err = boot.BootConfig(ctx, &provisionmodulev1.BootConfigRequest{Ticket: "nonsense"})
	wantCode(t, err, connect.CodeInvalidArgument, "malformed ticket")

	if _, err := e.Pool.Exec(ctx, `UPDATE provision_boot_tickets SET expires_at = now() - interval '1 second' WHERE machine_id = $1`, id2); err != nil {
		t.Fatal(err)
	}
	_, err = boot.BootConfig(ctx, &provisionmodulev1.BootConfigRequest{Ticket: ticket2})
	wantCode(t, err, connect.CodePermissionDenied, "expired ticket")
}

// TestBootConfigTenantIsolation: a ticket's secret opens its own machine only: with another
// tenant's machine id it is refused, and that machine's configuration stays unfetched.
func TestBootConfigTenantIsolation(t *testing.T) {
	t.Parallel()
	e, rec := bootEnv(t)
	slowClass(t, e, e.client)
	other := e.childTenant(t, "other")
	slowClass(t, e, other)
	boot := bootClient(e)
	ctx := t.Context()

	_, mine := awaitBootURL(t, e, rec, e.client, "mine")
	theirs, theirTicket := awaitBootURL(t, e, rec, other, "theirs")
	_, secret, _ := strings.Cut(strings.TrimPrefix(mine, ticketPrefix), "_")
	_, err := boot.BootConfig(ctx, &provisionmodulev1.BootConfigRequest{Ticket: ticketPrefix + theirs.String() + "_" + secret})
	wantCode(t, err, connect.CodePermissionDenied, "my secret with their machine")
	res, err := boot.BootConfig(ctx, &provisionmodulev1.BootConfigRequest{Ticket: theirTicket})
	if err != nil || res.GetMachineId() != theirs.String() {
		t.Fatalf("their own ticket: %v, %v", res, err)
	}
}

// slowClass creates the class "slow" for client's tenant: sim machines that take 10 minutes to boot.
func slowClass(t *testing.T, e *env, client provisionmodulev1connect.ProvisionModuleServiceClient) {
	t.Helper()
	params, err := structpb.NewStruct(map[string]any{"bootDelay": "10m"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.CreateClass(t.Context(), &provisionmodulev1.CreateClassRequest{Name: "slow", Provider: simprovider.Kind, Params: params}); err != nil {
		t.Fatal(err)
	}
}
