package capacity_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	auditv1 "github.com/better-compute/better-compute/gen/go/bettercompute/audit/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/audit/v1/auditv1connect"
	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1/commandsv1connect"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	eventsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/events/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/events/v1/eventsv1connect"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1/iamv1connect"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1/leasesv1connect"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1/poolsv1connect"
	reservationsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/reservations/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/reservations/v1/reservationsv1connect"
	usagev1 "github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/usage/v1/usagev1connect"
	webhooksv1 "github.com/better-compute/better-compute/gen/go/bettercompute/webhooks/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/webhooks/v1/webhooksv1connect"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/internal/poll"
	"github.com/better-compute/better-compute/internal/reconcile"
	"github.com/better-compute/better-compute/internal/sinks"
	"github.com/better-compute/better-compute/internal/webhook"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
	"github.com/better-compute/better-compute/workers/internal/metering"
	"github.com/better-compute/better-compute/workers/internal/placer"
	"github.com/better-compute/better-compute/workers/internal/placer/placertest"
)

// placerCycle bounds one placer cycle as this test runs it: the reconcile runtime finds a key
// that came due (the end of a preempted lease's grace period) within its poll interval of a
// second, woken keys at once, and a reconcile of a pool this small takes a fraction of a second,
// under the race detector on a shared machine too.
const placerCycle = 2 * time.Second

// grace is the shared pool's preemption grace period.
const grace = 2 * time.Second

// tenantAPI is one tenant's view of the API: clients that call with one of its keys.
type tenantAPI struct {
	name, id     string
	principal    string // the principal the key belongs to
	leases       leasesv1connect.LeasesServiceClient
	pools        poolsv1connect.PoolsServiceClient
	nodes        nodesv1connect.NodesServiceClient
	usage        usagev1connect.UsageServiceClient
	reservations reservationsv1connect.ReservationsServiceClient
	commands     commandsv1connect.CommandsServiceClient
	events       eventsv1connect.EventsServiceClient
	webhooks     webhooksv1connect.WebhooksServiceClient
	iam          iamv1connect.IamServiceClient
	audit        auditv1connect.AuditServiceClient
}

// apiAs returns the view of the API of the tenant whose key is key, asking iam/whoAmI who that is.
func apiAs(t *testing.T, env *servertest.Env, name, key string) *tenantAPI {
	t.Helper()
	c := env.HTTPClient(key)
	a := &tenantAPI{
		name:         name,
		leases:       leasesv1connect.NewLeasesServiceClient(c, env.URL),
		pools:        poolsv1connect.NewPoolsServiceClient(c, env.URL),
		nodes:        nodesv1connect.NewNodesServiceClient(c, env.URL),
		usage:        usagev1connect.NewUsageServiceClient(c, env.URL),
		reservations: reservationsv1connect.NewReservationsServiceClient(c, env.URL),
		commands:     commandsv1connect.NewCommandsServiceClient(c, env.URL),
		events:       eventsv1connect.NewEventsServiceClient(c, env.URL),
		webhooks:     webhooksv1connect.NewWebhooksServiceClient(c, env.URL),
		iam:          env.IAM(key),
		audit:        env.Audit(key),
	}
	who, err := a.iam.WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	if err != nil {
		t.Fatalf("%s: whoAmI: %v", name, err)
	}
	a.id, a.principal = who.GetTenant().GetId(), who.GetPrincipal().GetId()
	return a
}

// childTenant creates a tenant below the root through iam/createTenant and returns its view of
// the API, with the key of the owner service account the tenant was created with.
func childTenant(t *testing.T, env *servertest.Env, root *tenantAPI, name string) *tenantAPI {
	t.Helper()
	res, err := root.iam.CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: name})
	if err != nil {
		t.Fatalf("create tenant %s: %v", name, err)
	}
	a := apiAs(t, env, name, res.GetOwnerApiKey())
	if a.id != res.GetTenant().GetId() {
		t.Fatalf("the key of tenant %s calls as tenant %s", res.GetTenant().GetId(), a.id)
	}
	return a
}

// hookReceiver is a webhook endpoint: it verifies every delivery with the secret webhooks/create
// returned and keeps what it received. (server/internal/e2e/webhooks has a receiver of its own, in its
// test package.)
type hookReceiver struct {
	t      *testing.T
	mu     sync.Mutex
	secret string
	got    []delivery
}

// delivery is one webhook delivery as the receiver read it.
type delivery struct {
	Type    string         `json:"type"`
	Subject string         `json:"subject"`
	Data    map[string]any `json:"data"`
	body    string
}

func (rc *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err := webhook.Verify(rc.secret, r.Header, body); err != nil {
		rc.t.Errorf("webhook receiver: %v", err)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var d delivery
	if err := json.Unmarshal(body, &d); err != nil {
		rc.t.Errorf("webhook receiver: %v", err)
	}
	d.body = string(body)
	rc.got = append(rc.got, d)
}

func (rc *hookReceiver) received() []delivery {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]delivery(nil), rc.got...)
}

// hook creates a webhook of a's tenant through the API, delivering the event types to a new
// receiver; it returns the receiver and the webhook's id.
func hook(t *testing.T, a *tenantAPI, types ...string) (*hookReceiver, string) {
	t.Helper()
	rc := &hookReceiver{t: t}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	res, err := a.webhooks.Create(ctx, &webhooksv1.CreateRequest{Url: srv.URL + "/" + a.name, EventTypes: types})
	if err != nil {
		t.Fatalf("%s: create webhook: %v", a.name, err)
	}
	rc.mu.Lock()
	rc.secret = res.GetSecret()
	rc.mu.Unlock()
	return rc, res.GetWebhook().GetId()
}

// runSinks runs the sinks role, which delivers webhooks, until the test ends.
func runSinks(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	sealer, err := webhook.NewSealer(servertest.Secret)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- sinks.Run(runCtx, locks.NewHolder(pool, "sinks", nil), pool, sinks.Options{
			Sealer: sealer, AllowPrivate: true, Refresh: 50 * time.Millisecond, Poll: 10 * time.Millisecond,
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// gpus is an amount of H100s in the API's form.
func gpus(n int32) *poolsv1.Resources { return &poolsv1.Resources{Gpus: map[string]int32{"H100": n}} }

// leaseIn creates a lease of n GPUs as a, failing the test if it is refused.
func leaseIn(t *testing.T, a *tenantAPI, poolID string, n int32) *leasesv1.Lease {
	t.Helper()
	res, err := a.leases.Create(ctx, &leasesv1.CreateRequest{PoolId: poolID, Gpus: n, Duration: hour()})
	if err != nil {
		t.Fatalf("%s: create a lease of %d GPUs: %v", a.name, n, err)
	}
	return res.GetLease()
}

// getLease reads a lease as a.
func getLease(t *testing.T, a *tenantAPI, id string) *leasesv1.Lease {
	t.Helper()
	res, err := a.leases.Get(ctx, &leasesv1.GetRequest{Id: id})
	if err != nil {
		t.Fatalf("%s: get lease %s: %v", a.name, id, err)
	}
	return res.GetLease()
}

// waitState polls a's lease until it is in state, and returns it.
func waitState(t *testing.T, a *tenantAPI, id string, state leasesv1.LeaseState) *leasesv1.Lease {
	t.Helper()
	var l *leasesv1.Lease
	poll.Until(t, 30*time.Second, a.name+"'s lease "+id+" is "+state.String(), func() bool {
		l = getLease(t, a, id)
		return l.GetState() == state
	}, poll.Every(20*time.Millisecond), poll.Report(func() string { return protojson.Format(l) }))
	return l
}

// nodesOf returns the nodes a lease's allocations are on, deduplicated.
func nodesOf(l *leasesv1.Lease) []string {
	var out []string
	for _, a := range l.GetAllocations() {
		if len(out) == 0 || out[len(out)-1] != a.GetNodeId() {
			out = append(out, a.GetNodeId())
		}
	}
	return out
}

// hidden is what a reader must never see of the other tenants: ids it tries with every method
// that takes one, and strings no answer to it may contain.
type hidden struct {
	leases, nodes, pools, reservations, commands, webhooks, principals, tenants []string
	// secret are ids that appear in no answer to the reader: the other tenants' leases, pools,
	// principals and so on, and the nodes it never held anything on.
	secret []string
}

// noLeak fails the test if what an answer says (its JSON, and an export's data) contains any of
// secret.
func noLeak(t *testing.T, what string, m proto.Message, secret []string) {
	t.Helper()
	text := protojson.Format(m)
	if e, ok := m.(*usagev1.ExportResponse); ok {
		text += string(e.GetData())
	}
	for _, s := range secret {
		if strings.Contains(text, s) {
			t.Errorf("%s shows %s of another tenant: %s", what, s, text)
		}
	}
}

// notFound checks that a call naming another tenant's resource was answered NotFound.
func notFound(t *testing.T, what string, err error) {
	t.Helper()
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("%s: %v, want NotFound", what, err)
	}
}

// nothing checks a read filtered by another tenant's resource: NotFound, or an answer with no
// items (items counts them) that shows nothing secret.
func nothing[T proto.Message](t *testing.T, what string, res T, err error, items func(T) int, secret []string) {
	t.Helper()
	if connect.CodeOf(err) == connect.CodeNotFound {
		return
	}
	if err != nil {
		t.Errorf("%s: %v, want NotFound or nothing", what, err)
		return
	}
	if n := items(res); n != 0 {
		t.Errorf("%s: %d items, want none: %v", what, n, res)
	}
	noLeak(t, what, res, secret)
}

// ownOnly checks a read that succeeds for the reader (a list, a usage report): it shows only
// the reader's tenant (tenants lists the tenant ids of its items) and nothing secret.
func ownOnly[T proto.Message](t *testing.T, r *tenantAPI, what string, res T, err error, tenants func(T) []string, secret []string) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v", what, err)
		return
	}
	for _, id := range tenants(res) {
		if id != r.id {
			t.Errorf("%s shows an item of tenant %s to tenant %s: %v", what, id, r.id, res)
		}
	}
	noLeak(t, what, res, secret)
}

// period is the usage period the test reads: today and tomorrow, whole hours.
func period() (*timestamppb.Timestamp, *timestamppb.Timestamp) {
	start := time.Now().UTC().Truncate(time.Hour).Add(-24 * time.Hour)
	return timestamppb.New(start), timestamppb.New(start.Add(72 * time.Hour))
}

// cannotSee tries, as r, every read method of the API that takes an id (and the writes that
// take a lease's, node's or pool's id) with the ids of h, and checks that each is NotFound or
// finds nothing, and that r's own lists and reports show nothing of h. shared is the pool granted
// to r; held is the owner's node r's placed lease is on, which r sees reduced.
//
// Skipped: jointokens/list and secrets/list take no id, and no tenant of this test has join tokens
// or secrets to leak; iam/whoAmI and system/info describe the caller and the deployment.
func cannotSee(t *testing.T, r *tenantAPI, h hidden, shared, held string) {
	t.Helper()
	from, to := period()
	t.Run(r.name+"/leases", func(t *testing.T) {
		for _, id := range h.leases {
			_, err := r.leases.Get(ctx, &leasesv1.GetRequest{Id: id})
			notFound(t, "leases/get "+id, err)
			_, err = r.leases.Extend(ctx, &leasesv1.ExtendRequest{Id: id, By: durationpb.New(time.Minute)})
			notFound(t, "leases/extend "+id, err)
			_, err = r.leases.Release(ctx, &leasesv1.ReleaseRequest{Id: id})
			notFound(t, "leases/release "+id, err)
			ev, err := r.events.List(ctx, &eventsv1.ListRequest{Subject: "lease/" + id})
			nothing(t, "events/list subject lease/"+id, ev, err, func(x *eventsv1.ListResponse) int { return len(x.GetEvents()) }, h.secret)
		}
		for _, p := range append([]string{"", shared}, h.pools...) {
			res, err := r.leases.List(ctx, &leasesv1.ListRequest{PoolId: p})
			ownOnly(t, r, "leases/list pool "+p, res, err, func(res *leasesv1.ListResponse) (ids []string) {
				for _, l := range res.GetLeases() {
					ids = append(ids, l.GetTenantId())
				}
				return ids
			}, h.secret)
		}
	})
	t.Run(r.name+"/nodes", func(t *testing.T) {
		for _, id := range h.nodes {
			_, err := r.nodes.Get(ctx, &nodesv1.GetRequest{Id: id})
			notFound(t, "nodes/get "+id, err)
		}
		for _, id := range append([]string{held}, h.nodes...) {
			hist, err := r.nodes.InventoryHistory(ctx, &nodesv1.InventoryHistoryRequest{Id: id})
			nothing(t, "nodes/inventoryHistory "+id, hist, err, func(x *nodesv1.InventoryHistoryResponse) int { return len(x.GetRecords()) }, h.secret)
			_, err = r.nodes.Cordon(ctx, &nodesv1.CordonRequest{Id: id})
			notFound(t, "nodes/cordon "+id, err)
			cmds, err := r.commands.List(ctx, &commandsv1.ListRequest{NodeId: id})
			nothing(t, "commands/list node "+id, cmds, err, func(x *commandsv1.ListResponse) int { return len(x.GetCommands()) }, h.secret)
			_, err = r.commands.Create(ctx, &commandsv1.CreateRequest{NodeId: id, Payload: &commandsv1.CreateRequest_Echo{Echo: &daemonv1.EchoPayload{}}})
			notFound(t, "commands/create node "+id, err)
			ev, err := r.events.List(ctx, &eventsv1.ListRequest{Subject: "node/" + id})
			nothing(t, "events/list subject node/"+id, ev, err, func(x *eventsv1.ListResponse) int { return len(x.GetEvents()) }, h.secret)
		}
		// The node r's lease holds GPUs on: reduced, with nothing of the owner's but what the
		// proto allows.
		res, err := r.nodes.Get(ctx, &nodesv1.GetRequest{Id: held})
		if err != nil {
			t.Fatalf("nodes/get %s (held): %v", held, err)
		}
		n := res.GetNode()
		if !n.GetReduced() || n.GetId() != held || n.GetHostname() == "" || n.GetState() != "ready" ||
			len(n.GetLabels()) != 0 || n.GetTenantId() != "" || n.GetPool() != "" || n.GetJoinTokenId() != "" ||
			n.GetSpec() != nil || len(n.GetTaints()) != 0 || len(n.GetConditions()) != 0 || n.GetCertExpireTime() != nil ||
			len(n.GetInventory().GetGpus()) != 4 {
			t.Errorf("nodes/get %s (held) is not the reduced view: %v", held, n)
		}
		noLeak(t, "nodes/get (held)", res, h.secret)
		list, err := r.nodes.List(ctx, &nodesv1.ListRequest{})
		nothing(t, "nodes/list", list, err, func(x *nodesv1.ListResponse) int { return len(x.GetNodes()) }, h.secret)
		list, err = r.nodes.List(ctx, &nodesv1.ListRequest{LabelSelector: map[string]string{"gpu": "h100"}})
		nothing(t, "nodes/list gpu=h100", list, err, func(x *nodesv1.ListResponse) int { return len(x.GetNodes()) }, h.secret)
	})
	t.Run(r.name+"/pools", func(t *testing.T) {
		for _, id := range append([]string{shared}, h.pools...) {
			// Only the owner writes its pool.
			_, err := r.pools.Update(ctx, &poolsv1.UpdateRequest{Id: id, Description: "x", UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"description"}}})
			notFound(t, "pools/update "+id, err)
			_, err = r.pools.Delete(ctx, &poolsv1.DeleteRequest{Id: id})
			notFound(t, "pools/delete "+id, err)
			for _, other := range h.tenants {
				_, err = r.pools.Grant(ctx, &poolsv1.GrantRequest{PoolId: id, TenantId: other, Nominal: gpus(1)})
				notFound(t, "pools/grant "+id+" to "+other, err)
				_, err = r.pools.RevokeGrant(ctx, &poolsv1.RevokeGrantRequest{PoolId: id, TenantId: other})
				notFound(t, "pools/revokeGrant "+id+" of "+other, err)
			}
			// Preemptions are the owner's to watch.
			pre, err := r.pools.ListPreemptions(ctx, &poolsv1.ListPreemptionsRequest{PoolId: id})
			nothing(t, "pools/listPreemptions "+id, pre, err, func(x *poolsv1.ListPreemptionsResponse) int { return len(x.GetPreemptions()) }, h.secret)
			res, err := r.reservations.List(ctx, &reservationsv1.ListRequest{PoolId: id, IncludeCancelled: true})
			nothing(t, "reservations/list pool "+id, res, err, func(x *reservationsv1.ListResponse) int { return len(x.GetReservations()) }, h.secret)
			owned, err := r.usage.Query(ctx, &usagev1.QueryRequest{StartTime: from, EndTime: to, PoolId: id, Hourly: true, Scope: usagev1.Scope_SCOPE_OWNED_POOLS})
			nothing(t, "usage/query owned pools, pool "+id, owned, err, func(x *usagev1.QueryResponse) int { return len(x.GetTotals()) + len(x.GetHours()) }, h.secret)
			exp, err := r.usage.Export(ctx, &usagev1.ExportRequest{StartTime: from, EndTime: to, PoolId: id, Scope: usagev1.Scope_SCOPE_OWNED_POOLS, Format: usagev1.ExportFormat_EXPORT_FORMAT_JSONL})
			nothing(t, "usage/export owned pools, pool "+id, exp, err, func(x *usagev1.ExportResponse) int { return int(x.GetRows()) }, h.secret)
		}
		for _, id := range h.pools {
			_, err := r.pools.Get(ctx, &poolsv1.GetRequest{Id: id})
			notFound(t, "pools/get "+id, err)
			grants, err := r.pools.ListGrants(ctx, &poolsv1.ListGrantsRequest{PoolId: id, IncludeRevoked: true})
			nothing(t, "pools/listGrants pool "+id, grants, err, func(x *poolsv1.ListGrantsResponse) int { return len(x.GetGrants()) }, h.secret)
			q, err := r.usage.Query(ctx, &usagev1.QueryRequest{StartTime: from, EndTime: to, PoolId: id, Hourly: true})
			nothing(t, "usage/query pool "+id, q, err, func(x *usagev1.QueryResponse) int { return len(x.GetTotals()) + len(x.GetHours()) }, h.secret)
			exp, err := r.usage.Export(ctx, &usagev1.ExportRequest{StartTime: from, EndTime: to, PoolId: id})
			nothing(t, "usage/export pool "+id, exp, err, func(x *usagev1.ExportResponse) int { return int(x.GetRows()) }, h.secret)
			ev, err := r.events.List(ctx, &eventsv1.ListRequest{Subject: "pool/" + id})
			nothing(t, "events/list subject pool/"+id, ev, err, func(x *eventsv1.ListResponse) int { return len(x.GetEvents()) }, h.secret)
		}
		// The granted pool: r's grant, without the owner's membership.
		got, err := r.pools.Get(ctx, &poolsv1.GetRequest{Id: shared})
		if err != nil {
			t.Fatalf("pools/get %s (granted): %v", shared, err)
		}
		p := got.GetPool()
		if !p.GetGranted() || len(p.GetNodeSelector()) != 0 || len(p.GetNodeIds()) != 0 || p.GetGrant().GetTenantId() != r.id {
			t.Errorf("pools/get %s (granted): %v", shared, p)
		}
		noLeak(t, "pools/get (granted)", got, h.secret)
		list, err := r.pools.List(ctx, &poolsv1.ListRequest{})
		ownOnly(t, r, "pools/list", list, err, func(res *poolsv1.ListResponse) (ids []string) {
			for _, p := range res.GetPools() {
				if p.GetGranted() {
					ids = append(ids, p.GetGrant().GetTenantId())
				} else {
					ids = append(ids, p.GetTenantId())
				}
			}
			return ids
		}, h.secret)
		for _, p := range []string{"", shared} {
			grants, err := r.pools.ListGrants(ctx, &poolsv1.ListGrantsRequest{PoolId: p, IncludeRevoked: true})
			ownOnly(t, r, "pools/listGrants pool "+p, grants, err, func(res *poolsv1.ListGrantsResponse) (ids []string) {
				for _, g := range res.GetGrants() {
					ids = append(ids, g.GetTenantId())
				}
				return ids
			}, h.secret)
			q, err := r.usage.Query(ctx, &usagev1.QueryRequest{StartTime: from, EndTime: to, PoolId: p, Hourly: true})
			ownOnly(t, r, "usage/query pool "+p, q, err, func(res *usagev1.QueryResponse) (ids []string) {
				for _, u := range append(res.GetTotals(), res.GetHours()...) {
					ids = append(ids, u.GetTenantId())
				}
				return ids
			}, h.secret)
			exp, err := r.usage.Export(ctx, &usagev1.ExportRequest{StartTime: from, EndTime: to, PoolId: p, Format: usagev1.ExportFormat_EXPORT_FORMAT_JSONL})
			ownOnly(t, r, "usage/export pool "+p, exp, err, func(res *usagev1.ExportResponse) (ids []string) {
				for line := range strings.Lines(string(res.GetData())) {
					var row struct {
						TenantID string `json:"tenantId"`
					}
					if err := json.Unmarshal([]byte(line), &row); err != nil {
						t.Errorf("usage/export line %q: %v", line, err)
					}
					ids = append(ids, row.TenantID)
				}
				return ids
			}, h.secret)
		}
		owned, err := r.usage.Query(ctx, &usagev1.QueryRequest{StartTime: from, EndTime: to, Hourly: true, Scope: usagev1.Scope_SCOPE_OWNED_POOLS})
		nothing(t, "usage/query owned pools", owned, err, func(x *usagev1.QueryResponse) int { return len(x.GetTotals()) + len(x.GetHours()) }, h.secret)
		pre, err := r.pools.ListPreemptions(ctx, &poolsv1.ListPreemptionsRequest{})
		nothing(t, "pools/listPreemptions", pre, err, func(x *poolsv1.ListPreemptionsResponse) int { return len(x.GetPreemptions()) }, h.secret)
	})
	t.Run(r.name+"/other", func(t *testing.T) {
		for _, id := range h.reservations {
			_, err := r.reservations.Get(ctx, &reservationsv1.GetRequest{Id: id})
			notFound(t, "reservations/get "+id, err)
		}
		for _, id := range h.commands {
			_, err := r.commands.Get(ctx, &commandsv1.GetRequest{Id: id})
			notFound(t, "commands/get "+id, err)
		}
		for _, id := range h.webhooks {
			_, err := r.webhooks.Get(ctx, &webhooksv1.GetRequest{Id: id})
			notFound(t, "webhooks/get "+id, err)
			dl, err := r.webhooks.ListDeadLetters(ctx, &webhooksv1.ListDeadLettersRequest{Id: id})
			nothing(t, "webhooks/listDeadLetters "+id, dl, err, func(x *webhooksv1.ListDeadLettersResponse) int { return len(x.GetDeadLetters()) }, h.secret)
		}
		for _, id := range h.tenants {
			_, err := r.iam.GetTenant(ctx, &iamv1.GetTenantRequest{Id: id})
			notFound(t, "iam/getTenant "+id, err)
		}
		for _, id := range h.principals {
			_, err := r.iam.GetPrincipal(ctx, &iamv1.GetPrincipalRequest{Id: id})
			notFound(t, "iam/getPrincipal "+id, err)
			keys, err := r.iam.ListApiKeys(ctx, &iamv1.ListApiKeysRequest{PrincipalId: id})
			nothing(t, "iam/listApiKeys principal "+id, keys, err, func(x *iamv1.ListApiKeysResponse) int { return len(x.GetApiKeys()) }, h.secret)
			rb, err := r.iam.ListRoleBindings(ctx, &iamv1.ListRoleBindingsRequest{PrincipalId: id})
			nothing(t, "iam/listRoleBindings principal "+id, rb, err, func(x *iamv1.ListRoleBindingsResponse) int { return len(x.GetRoleBindings()) }, h.secret)
			au, err := r.audit.List(ctx, &auditv1.ListRequest{PrincipalId: id})
			nothing(t, "audit/list principal "+id, au, err, func(x *auditv1.ListResponse) int { return len(x.GetEvents()) }, h.secret)
		}
		// Unfiltered lists of r's tenant.
		ev, err := r.events.List(ctx, &eventsv1.ListRequest{PageSize: 500})
		ownOnly(t, r, "events/list", ev, err, func(res *eventsv1.ListResponse) (ids []string) {
			for _, e := range res.GetEvents() {
				ids = append(ids, e.GetTenantId())
			}
			return ids
		}, h.secret)
		res, err := r.reservations.List(ctx, &reservationsv1.ListRequest{IncludeCancelled: true})
		nothing(t, "reservations/list", res, err, func(x *reservationsv1.ListResponse) int { return len(x.GetReservations()) }, h.secret)
		cmds, err := r.commands.List(ctx, &commandsv1.ListRequest{})
		nothing(t, "commands/list", cmds, err, func(x *commandsv1.ListResponse) int { return len(x.GetCommands()) }, h.secret)
		hooks, err := r.webhooks.List(ctx, &webhooksv1.ListRequest{})
		ownOnly(t, r, "webhooks/list", hooks, err, func(res *webhooksv1.ListResponse) (ids []string) {
			for _, w := range res.GetWebhooks() {
				ids = append(ids, w.GetTenantId())
			}
			return ids
		}, h.secret)
		tenants, err := r.iam.ListTenants(ctx, &iamv1.ListTenantsRequest{})
		ownOnly(t, r, "iam/listTenants", tenants, err, func(res *iamv1.ListTenantsResponse) (ids []string) {
			for _, tn := range res.GetTenants() {
				ids = append(ids, tn.GetId())
			}
			return ids
		}, h.secret)
		principals, err := r.iam.ListPrincipals(ctx, &iamv1.ListPrincipalsRequest{})
		ownOnly(t, r, "iam/listPrincipals", principals, err, func(res *iamv1.ListPrincipalsResponse) (ids []string) {
			for _, p := range res.GetPrincipals() {
				ids = append(ids, p.GetTenantId())
			}
			return ids
		}, h.secret)
		keys, err := r.iam.ListApiKeys(ctx, &iamv1.ListApiKeysRequest{})
		ownOnly(t, r, "iam/listApiKeys", keys, err, func(res *iamv1.ListApiKeysResponse) (ids []string) {
			for _, k := range res.GetApiKeys() {
				ids = append(ids, k.GetTenantId())
			}
			return ids
		}, h.secret)
		bindings, err := r.iam.ListRoleBindings(ctx, &iamv1.ListRoleBindingsRequest{})
		ownOnly(t, r, "iam/listRoleBindings", bindings, err, func(res *iamv1.ListRoleBindingsResponse) (ids []string) {
			for _, b := range res.GetRoleBindings() {
				ids = append(ids, b.GetTenantId())
			}
			return ids
		}, h.secret)
		// The audit log names the ids r's own refused calls above named: only its tenant is checked.
		au, err := r.audit.List(ctx, &auditv1.ListRequest{PageSize: 500})
		ownOnly(t, r, "audit/list", au, err, func(res *auditv1.ListResponse) (ids []string) {
			for _, e := range res.GetEvents() {
				ids = append(ids, e.GetTenantId())
			}
			return ids
		}, nil)
	})
}

// TestSharedCapacity runs issue 14's story end to end, each tenant calling with its own key: the
// root tenant owns two simulated nodes of 4 H100s in a pool and grants it to tenants A (nominal
// 2, may borrow 4 more) and B (nominal 4, no borrowing); the owner's nominal quota is the 2 left.
// A leases within its quota, then borrows idle capacity; B then leases its nominal share, and A's
// newest borrowed lease is preempted, B placed once the grace period is over, and A's webhook
// told. Neither grantee can read the other's leases, usage or webhooks, nor the owner's nodes,
// pools, leases, reservations or commands, by any read method. Revoking A's grant refuses A's
// new leases and fails its pending one; its placed leases run on.
func TestSharedCapacity(t *testing.T) { //nolint:tparallel // the steps are one story, in order: isolation is checked before the revoke
	t.Parallel()
	pool := dbtest.Pool(t)
	rt := placertest.Run(t, pool, placer.Options{})
	env := servertest.Start(t, pool, func(o *server.Options) {
		// leases/create wakes the placer of this process at once, as a deployment's waker does
		// (its notifications, which Run would send to other processes, are not needed here).
		o.Waker = reconcile.NewWaker(pool, rt, nil)
		o.WebhooksAllowPrivate = true
	})
	owner := apiAs(t, env, "owner", env.AdminKey)
	a := childTenant(t, env, owner, "tenant-a")
	b := childTenant(t, env, owner, "tenant-b")

	// The owner's fleet: the shared pool of two 4-GPU nodes, and a private pool of an A100
	// node that is granted to no one.
	shared := fleet(t, env, 2, 4)
	upd, err := owner.pools.Update(ctx, &poolsv1.UpdateRequest{Id: shared, PreemptionGracePeriod: durationpb.New(grace),
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"preemption_grace_period"}}})
	if err != nil || upd.GetPool().GetPreemptionGracePeriod().AsDuration() != grace {
		t.Fatalf("set the grace period: %v, %v", upd, err)
	}
	privateNode := capacitytest.Nodes(t, pool, capacitytest.RootTenant(t, pool), 1,
		capacitytest.NodeSpec{GPUs: 2, Model: "A100", CPUs: 32, MemoryBytes: 128 << 30, Labels: map[string]string{"gpu": "a100"}})[0].String()
	priv, err := owner.pools.Create(ctx, &poolsv1.CreateRequest{Name: "private", NodeIds: []string{privateNode}})
	if err != nil {
		t.Fatal(err)
	}
	private := priv.GetPool().GetId()

	// Grants, through the API.
	ga, err := owner.pools.Grant(ctx, &poolsv1.GrantRequest{PoolId: shared, TenantId: a.id, Nominal: gpus(2), BorrowingLimit: gpus(4)})
	if err != nil {
		t.Fatalf("grant A: %v", err)
	}
	if g := ga.GetGrant(); g.GetTenantId() != a.id || g.GetPoolId() != shared || g.GetNominal().GetGpus()["H100"] != 2 ||
		g.GetBorrowingLimit().GetGpus()["H100"] != 4 || g.GetWeight() != 1 || g.GetRevokeTime() != nil {
		t.Fatalf("grant A: %v", g)
	}
	if _, err := owner.pools.Grant(ctx, &poolsv1.GrantRequest{PoolId: shared, TenantId: b.id, Nominal: gpus(4)}); err != nil {
		t.Fatalf("grant B: %v", err)
	}

	// Each grantee has a pool of its own, empty: a label selector does not reach the owner's
	// nodes, nor may node ids name them.
	own := map[*tenantAPI]string{}
	for _, g := range []*tenantAPI{a, b} {
		res, err := g.pools.Create(ctx, &poolsv1.CreateRequest{Name: "mine", NodeSelector: map[string]string{"gpu": "h100"}})
		if err != nil {
			t.Fatalf("%s: create a pool: %v", g.name, err)
		}
		if c := res.GetPool().GetCapacity(); c.GetNodes() != 0 || len(c.GetGpus()) != 0 {
			t.Errorf("%s's own pool selects the owner's nodes: %v", g.name, c)
		}
		own[g] = res.GetPool().GetId()
		_, err = g.pools.Create(ctx, &poolsv1.CreateRequest{Name: "theirs", NodeIds: []string{privateNode}})
		wantField(t, err, connect.CodeFailedPrecondition, "node_ids")
	}

	// Webhooks: A's takes lease placements and preemptions; B's takes everything of B's.
	hookA, hookAID := hook(t, a, "lease.placed", "lease.preempted")
	hookB, hookBID := hook(t, b)
	runSinks(t, pool)

	// A leases within its nominal quota, then borrows idle capacity twice.
	l1 := leaseIn(t, a, shared, 2)
	l1 = waitState(t, a, l1.GetId(), leasesv1.LeaseState_LEASE_STATE_PLACED)
	if l1.GetBorrowing() || l1.GetTenantId() != a.id || l1.GetPoolId() != shared {
		t.Fatalf("A's lease within quota: %v", l1)
	}
	l2 := waitState(t, a, leaseIn(t, a, shared, 2).GetId(), leasesv1.LeaseState_LEASE_STATE_PLACED)
	l3 := waitState(t, a, leaseIn(t, a, shared, 2).GetId(), leasesv1.LeaseState_LEASE_STATE_PLACED)
	if !l2.GetBorrowing() || !l3.GetBorrowing() {
		t.Fatalf("A's leases beyond its quota do not borrow: %v\n%v", l2, l3)
	}
	// Bin packing puts l1 and l2 on one node (x) and l3 on the other (y).
	x, y := nodesOf(l1), nodesOf(l3)
	if len(x) != 1 || len(y) != 1 || x[0] == y[0] || strings.Join(nodesOf(l2), ",") != x[0] {
		t.Fatalf("placement: l1 on %v, l2 on %v, l3 on %v; want l1 and l2 on one node, l3 on the other", x, nodesOf(l2), y)
	}
	nodeX, nodeY := x[0], y[0]
	gp, err := a.pools.Get(ctx, &poolsv1.GetRequest{Id: shared})
	if err != nil {
		t.Fatal(err)
	}
	if g := gp.GetPool().GetGrant(); g.GetUsed().GetGpus()["H100"] != 6 || g.GetBorrowed().GetGpus()["H100"] != 4 || g.GetBorrowable().GetGpus()["H100"] != 0 {
		t.Errorf("A's grant after borrowing 4: %v", g)
	}

	// The owner's own things, which no grantee may see: a lease in its private pool, a
	// reservation and a command.
	ownerLease := waitState(t, owner, leaseIn(t, owner, private, 1).GetId(), leasesv1.LeaseState_LEASE_STATE_PLACED)
	now := time.Now()
	resv, err := owner.reservations.Create(ctx, &reservationsv1.CreateRequest{PoolId: private,
		StartTime: timestamppb.New(now.Add(2 * time.Hour)), EndTime: timestamppb.New(now.Add(3 * time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	cmd, err := owner.commands.Create(ctx, &commandsv1.CreateRequest{NodeId: nodeY, Payload: &commandsv1.CreateRequest_Echo{Echo: &daemonv1.EchoPayload{}}})
	if err != nil || len(cmd.GetCommands()) != 1 {
		t.Fatalf("create a command: %v, %v", cmd, err)
	}

	// B leases its nominal share: the pool has 2 GPUs free, on x and y, and B's 4 need one node.
	// A's newest borrowed lease (l3, on y) is preempted for it; l2, which borrows too, is not.
	lb := leaseIn(t, b, shared, 4)
	l3 = waitState(t, a, l3.GetId(), leasesv1.LeaseState_LEASE_STATE_PREEMPTED)
	lb = waitState(t, b, lb.GetId(), leasesv1.LeaseState_LEASE_STATE_PLACED)
	preempted := l3.GetPreemptTime().AsTime()
	if l3.GetReason() == "" || l3.GetPreemptTime() == nil || !l3.GetBorrowing() ||
		!l3.GetEndTime().AsTime().Equal(preempted.Add(grace)) {
		t.Errorf("preempted lease: %v; want a reason, a preempt time and its end the grace period later", l3)
	}
	if d := preempted.Sub(lb.GetCreateTime().AsTime()); d < 0 || d > placerCycle {
		t.Errorf("l3 was preempted %v after B's lease was created, want within one placer cycle (%v)", d, placerCycle)
	}
	// B is placed on what l3 freed, once its grace period is over, within one placer cycle.
	placed := lb.GetPlaceTime().AsTime()
	if d := placed.Sub(preempted); d < grace || d > grace+placerCycle {
		t.Errorf("B's lease was placed %v after the preemption, want from the grace period (%v) to one placer cycle more (%v)", d, grace, grace+placerCycle)
	}
	t.Logf("preempted %v after B's lease was created; B placed %v after the preemption (grace %v)",
		preempted.Sub(lb.GetCreateTime().AsTime()), placed.Sub(preempted), grace)
	if lb.GetBorrowing() || strings.Join(nodesOf(lb), ",") != nodeY || len(lb.GetAllocations()) != 4 {
		t.Errorf("B's lease: %v; want 4 GPUs of node %s, not borrowing", lb, nodeY)
	}
	// l3 keeps its devices until its end, and frees them then.
	l3 = getLease(t, a, l3.GetId())
	if l3.GetState() != leasesv1.LeaseState_LEASE_STATE_PREEMPTED {
		t.Errorf("l3 after its grace period: %v, want still preempted", l3)
	}
	for _, al := range l3.GetAllocations() {
		if al.GetEndTime() == nil || !al.GetEndTime().AsTime().Equal(preempted.Add(grace)) || al.GetEndTime().AsTime().After(placed) {
			t.Errorf("l3's allocation %v was not freed at the end of the grace period (%v), before B was placed (%v)", al, preempted.Add(grace), placed)
		}
	}
	for _, l := range []*leasesv1.Lease{l1, l2} {
		if got := getLease(t, a, l.GetId()); got.GetState() != leasesv1.LeaseState_LEASE_STATE_PLACED {
			t.Errorf("A's lease %s: %v, want still placed", l.GetId(), got)
		}
	}
	pre, err := owner.pools.ListPreemptions(ctx, &poolsv1.ListPreemptionsRequest{PoolId: shared})
	if err != nil || len(pre.GetPreemptions()) != 1 || pre.GetPreemptions()[0].GetLeaseId() != l3.GetId() || pre.GetPreemptions()[0].GetTenantId() != a.id {
		t.Errorf("the owner's preemptions: %v, %v", pre, err)
	}

	// A's webhook is told, signed (the receiver verifies every delivery).
	var told delivery
	poll.Until(t, 30*time.Second, "A's webhook receives lease.preempted", func() bool {
		for _, d := range hookA.received() {
			if d.Type == "lease.preempted" && d.Subject == "lease/"+l3.GetId() {
				told = d
				return true
			}
		}
		return false
	}, poll.Report(func() string { return fmtDeliveries(hookA.received()) }))
	if told.Data["state"] != "preempted" || told.Data["tenantId"] != a.id || told.Data["borrowing"] != true || told.Data["reason"] == nil || told.Data["reason"] == "" || told.Data["endTime"] == nil {
		t.Errorf("lease.preempted: %s", told.body)
	}
	for _, d := range hookA.received() {
		if d.Type != "lease.placed" && d.Type != "lease.preempted" {
			t.Errorf("A's webhook received %s, which it did not subscribe to", d.Type)
		}
	}
	poll.Until(t, 30*time.Second, "B's webhook receives lease.placed", func() bool {
		for _, d := range hookB.received() {
			if d.Type == "lease.placed" && d.Subject == "lease/"+lb.GetId() {
				return true
			}
		}
		return false
	}, poll.Report(func() string { return fmtDeliveries(hookB.received()) }))

	// Usage: the metering job records what l3 used; A reads it, the owner charges it back.
	if _, err := metering.RunOnce(ctx, pool, metering.Options{}); err != nil {
		t.Fatal(err)
	}
	from, to := period()
	usedA, err := a.usage.Query(ctx, &usagev1.QueryRequest{StartTime: from, EndTime: to, PoolId: shared})
	if err != nil || len(usedA.GetTotals()) != 1 || usedA.GetTotals()[0].GetAmount() <= 0 || usedA.GetTotals()[0].GetTenantId() != a.id {
		t.Errorf("A's usage: %v, %v", usedA, err)
	}
	charged, err := owner.usage.Query(ctx, &usagev1.QueryRequest{StartTime: from, EndTime: to, PoolId: shared, Scope: usagev1.Scope_SCOPE_OWNED_POOLS})
	if err != nil || !hasTenant(charged.GetTotals(), a.id) {
		t.Errorf("the owner's usage of its pools: %v, %v; want A's", charged, err)
	}

	// Isolation, both ways.
	cannotSee(t, b, hidden{
		leases: []string{l1.GetId(), l2.GetId(), l3.GetId(), ownerLease.GetId()},
		nodes:  []string{nodeX, privateNode}, pools: []string{private, own[a]},
		reservations: []string{resv.GetReservation().GetId()}, commands: []string{cmd.GetCommands()[0].GetId()},
		webhooks: []string{hookAID}, principals: []string{a.principal, owner.principal}, tenants: []string{a.id, owner.id},
		secret: []string{l1.GetId(), l2.GetId(), l3.GetId(), ownerLease.GetId(), nodeX, privateNode, private, own[a],
			resv.GetReservation().GetId(), cmd.GetCommands()[0].GetId(), hookAID, a.principal, owner.principal, a.id},
	}, shared, nodeY)
	cannotSee(t, a, hidden{
		// A held l3 on y until it was preempted: y is no longer A's to see, though A's own
		// leases' history names it.
		leases: []string{lb.GetId(), ownerLease.GetId()},
		nodes:  []string{nodeY, privateNode}, pools: []string{private, own[b]},
		reservations: []string{resv.GetReservation().GetId()}, commands: []string{cmd.GetCommands()[0].GetId()},
		webhooks: []string{hookBID}, principals: []string{b.principal, owner.principal}, tenants: []string{b.id, owner.id},
		secret: []string{lb.GetId(), ownerLease.GetId(), privateNode, private, own[b],
			resv.GetReservation().GetId(), cmd.GetCommands()[0].GetId(), hookBID, b.principal, owner.principal, b.id},
	}, shared, nodeX)
	for _, d := range hookB.received() {
		for _, s := range []string{l1.GetId(), l2.GetId(), l3.GetId(), a.id, nodeX} {
			if strings.Contains(d.body, s) {
				t.Errorf("B's webhook received %s of A's: %s", s, d.body)
			}
		}
	}

	// Revocation: A's pending lease fails, its new leases are refused, its placed ones run on.
	l4 := leaseIn(t, a, shared, 2) // nothing is free, and A may not preempt: it waits
	rev, err := owner.pools.RevokeGrant(ctx, &poolsv1.RevokeGrantRequest{PoolId: shared, TenantId: a.id})
	if err != nil || rev.GetGrant().GetRevokeTime() == nil || rev.GetGrant().GetTenantId() != a.id {
		t.Fatalf("revoke: %v, %v", rev, err)
	}
	if got := getLease(t, a, l4.GetId()); got.GetState() != leasesv1.LeaseState_LEASE_STATE_FAILED || got.GetReason() == "" {
		t.Errorf("A's pending lease after the revoke: %v, want failed with a reason", got)
	}
	_, err = a.leases.Create(ctx, &leasesv1.CreateRequest{PoolId: shared, Gpus: 1, Duration: hour()})
	wantField(t, err, connect.CodeFailedPrecondition, "pool_id")
	// A placer cycle after the revoke changes nothing of A's placed leases.
	if res, err := placer.New(pool, placer.Options{}).ReconcilePool(ctx, shared); err != nil || res.Preempted != 0 || res.Expired != 0 {
		t.Fatalf("reconcile after the revoke: %+v, %v", res, err)
	}
	for _, l := range []*leasesv1.Lease{l1, l2} {
		got := getLease(t, a, l.GetId())
		if got.GetState() != leasesv1.LeaseState_LEASE_STATE_PLACED || !got.GetEndTime().AsTime().Equal(l.GetEndTime().AsTime()) {
			t.Errorf("A's placed lease after the revoke: %v, want placed until %v", got, l.GetEndTime().AsTime())
		}
	}
	// A may still end what it has.
	if rel, err := a.leases.Release(ctx, &leasesv1.ReleaseRequest{Id: l2.GetId()}); err != nil || rel.GetLease().GetState() != leasesv1.LeaseState_LEASE_STATE_RELEASED {
		t.Errorf("A releases its lease after the revoke: %v, %v", rel, err)
	}
	grants, err := a.pools.ListGrants(ctx, &poolsv1.ListGrantsRequest{IncludeRevoked: true})
	if err != nil || len(grants.GetGrants()) != 1 || grants.GetGrants()[0].GetRevokeTime() == nil {
		t.Errorf("A's grants after the revoke: %v, %v", grants, err)
	}
	active, err := a.pools.ListGrants(ctx, &poolsv1.ListGrantsRequest{})
	if err != nil || len(active.GetGrants()) != 0 {
		t.Errorf("A's active grants after the revoke: %v, %v", active, err)
	}
	// B's grant is untouched.
	if got := getLease(t, b, lb.GetId()); got.GetState() != leasesv1.LeaseState_LEASE_STATE_PLACED {
		t.Errorf("B's lease after A's revoke: %v", got)
	}
}

// hasTenant reports whether usage rows include tenant's.
func hasTenant(rows []*usagev1.Usage, tenant string) bool {
	for _, u := range rows {
		if u.GetTenantId() == tenant && u.GetAmount() > 0 {
			return true
		}
	}
	return false
}

// fmtDeliveries lists deliveries by type and subject, for a failure message.
func fmtDeliveries(ds []delivery) string {
	var b strings.Builder
	for _, d := range ds {
		b.WriteString(d.Type + " " + d.Subject + "\n")
	}
	return b.String()
}
