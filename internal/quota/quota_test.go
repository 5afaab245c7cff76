package quota_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/better-compute/better-compute/gen/db"
	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1/commandsv1connect"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	jointokensv1 "github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/jointokens/v1/jointokensv1connect"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1/leasesv1connect"
	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1/poolsv1connect"
	webhooksv1 "github.com/better-compute/better-compute/gen/go/bettercompute/webhooks/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/webhooks/v1/webhooksv1connect"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/guard"
	"github.com/better-compute/better-compute/internal/quota"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// start runs the API with the tenant caps l.
func start(t *testing.T, l quota.Limits) *servertest.Env {
	t.Helper()
	return servertest.Start(t, dbtest.Pool(t), func(o *server.Options) { o.RateLimits = guard.RateLimits{Tenant: l} })
}

// refused checks that err is ResourceExhausted naming the cap.
func refused(t *testing.T, what string, err error, limit quota.Limit) {
	t.Helper()
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), limit.Key()) {
		t.Fatalf("%s over the cap: %v, want resource_exhausted naming %s", what, err, limit.Key())
	}
}

func rows(t *testing.T, env *servertest.Env, table string) int {
	t.Helper()
	var n int
	if err := env.Pool.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTenantCapsRefuseTheCreateOverTheCap: each cap lets a tenant create up to it and refuses
// the next create with resource_exhausted naming the cap, leaving nothing behind.
func TestTenantCapsRefuseTheCreateOverTheCap(t *testing.T) { //nolint:tparallel // the subtests fill one tenant's caps, in order
	t.Parallel()
	// The root tenant starts with one principal (admin) and its one key.
	env := start(t, quota.Limits{Principals: 3, APIKeys: 3, JoinTokens: 2, Webhooks: 2, CommandsPerMinute: 3})
	admin := env.IAM(env.AdminKey)
	me, err := admin.WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("principals", func(t *testing.T) {
		create := func(i int) error {
			_, err := admin.CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{
				Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_SERVICE_ACCOUNT, Name: fmt.Sprintf("sa-%d", i),
			})
			return err
		}
		for i := range 2 {
			if err := create(i); err != nil {
				t.Fatal(err)
			}
		}
		refused(t, "principal", create(2), quota.Principals)
		if n := rows(t, env, "principals"); n != 3 {
			t.Errorf("%d principals, want 3", n)
		}
	})

	t.Run("apiKeys", func(t *testing.T) {
		create := func() error {
			_, err := admin.CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: me.GetPrincipal().GetId()})
			return err
		}
		for range 2 {
			if err := create(); err != nil {
				t.Fatal(err)
			}
		}
		refused(t, "API key", create(), quota.APIKeys)
		if n := rows(t, env, "api_keys"); n != 3 {
			t.Errorf("%d API keys, want 3", n)
		}
	})

	t.Run("joinTokens", func(t *testing.T) {
		tokens := jointokensv1connect.NewJoinTokensServiceClient(env.HTTPClient(env.AdminKey), env.URL)
		var first string
		for range 2 {
			res, err := tokens.Create(ctx, &jointokensv1.CreateRequest{})
			if err != nil {
				t.Fatal(err)
			}
			first = cmp.Or(first, res.GetJoinToken().GetId())
		}
		_, err := tokens.Create(ctx, &jointokensv1.CreateRequest{})
		refused(t, "join token", err, quota.JoinTokens)
		// The cap counts usable tokens: revoking one makes room.
		if _, err := tokens.Revoke(ctx, &jointokensv1.RevokeRequest{Id: first}); err != nil {
			t.Fatal(err)
		}
		if _, err := tokens.Create(ctx, &jointokensv1.CreateRequest{}); err != nil {
			t.Fatalf("create after a revoke: %v", err)
		}
	})

	t.Run("webhooks", func(t *testing.T) {
		hooks := webhooksv1connect.NewWebhooksServiceClient(env.HTTPClient(env.AdminKey), env.URL)
		for range 2 {
			if _, err := hooks.Create(ctx, &webhooksv1.CreateRequest{Url: "https://example.com/"}); err != nil {
				t.Fatal(err)
			}
		}
		_, err := hooks.Create(ctx, &webhooksv1.CreateRequest{Url: "https://example.com/"})
		refused(t, "webhook", err, quota.Webhooks)
		if n := rows(t, env, "webhooks"); n != 2 {
			t.Errorf("%d webhooks, want 2", n)
		}
	})

	t.Run("commandsPerMinute", func(t *testing.T) {
		tenant := uuid.MustParse(me.GetTenant().GetId())
		var nodes []uuid.UUID
		for range 2 {
			n, err := db.New(env.Pool).CreateNode(ctx, db.CreateNodeParams{ID: uuid.Must(uuid.NewV7()), TenantID: tenant, Labels: []byte(`{"cap":"x"}`)})
			if err != nil {
				t.Fatal(err)
			}
			nodes = append(nodes, n.ID)
		}
		cmds := commandsv1connect.NewCommandsServiceClient(env.HTTPClient(env.AdminKey), env.URL)
		for i := range 3 {
			if _, err := cmds.Create(ctx, &commandsv1.CreateRequest{NodeId: nodes[i%2].String(), Payload: &commandsv1.CreateRequest_Echo{Echo: &daemonv1.EchoPayload{}}}); err != nil {
				t.Fatal(err)
			}
		}
		_, err := cmds.Create(ctx, &commandsv1.CreateRequest{NodeId: nodes[0].String(), Payload: &commandsv1.CreateRequest_Echo{Echo: &daemonv1.EchoPayload{}}})
		refused(t, "command", err, quota.CommandsPerMinute)
		var cerr *connect.Error
		if !errors.As(err, &cerr) {
			t.Fatalf("not a Connect error: %v", err)
		}
		if s, err := strconv.Atoi(cerr.Meta().Get(guard.RetryAfterHeader)); err != nil || s < 1 || s > 60 {
			t.Errorf("Retry-After %q, want 1 to 60 seconds", cerr.Meta().Get(guard.RetryAfterHeader))
		}
		// A selector adding two more is refused too.
		_, err = cmds.Create(ctx, &commandsv1.CreateRequest{LabelSelector: map[string]string{"cap": "x"}, Payload: &commandsv1.CreateRequest_Echo{Echo: &daemonv1.EchoPayload{}}})
		refused(t, "selector command", err, quota.CommandsPerMinute)
		if n := rows(t, env, "commands"); n != 3 {
			t.Errorf("%d commands, want 3", n)
		}
	})
}

// TestPoolCapHoldsUnderConcurrentCreates races many creates at a tenant with room for a few:
// exactly the cap succeed.
func TestPoolCapHoldsUnderConcurrentCreates(t *testing.T) {
	t.Parallel()
	const limit, racers = 5, 20
	env := start(t, quota.Limits{Pools: limit})
	pools := poolsv1connect.NewPoolsServiceClient(env.HTTPClient(env.AdminKey), env.URL)
	var mu sync.Mutex
	codes := map[connect.Code]int{}
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			_, err := pools.Create(ctx, &poolsv1.CreateRequest{Name: fmt.Sprintf("pool-%d", i)})
			if err != nil && connect.CodeOf(err) != connect.CodeResourceExhausted {
				t.Errorf("create pool-%d: %v", i, err)
			}
			mu.Lock()
			codes[connect.CodeOf(err)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	ok := racers - codes[connect.CodeResourceExhausted]
	if ok != limit {
		t.Errorf("%d concurrent creates succeeded (codes %v), want %d", ok, codes, limit)
	}
	if n := rows(t, env, "pools"); n != limit {
		t.Errorf("%d pools, want %d", n, limit)
	}
}

// TestPendingLeasesCap: a tenant may have so many leases waiting, across every pool; a placed or
// released one no longer counts.
func TestPendingLeasesCap(t *testing.T) {
	t.Parallel()
	env := start(t, quota.Limits{PendingLeases: 2})
	tenant := capacitytest.RootTenant(t, env.Pool)
	capacitytest.Nodes(t, env.Pool, tenant, 1, capacitytest.NodeSpec{GPUs: 1, Model: "H100", Labels: map[string]string{"gpu": "h100"}})
	pool, err := poolsv1connect.NewPoolsServiceClient(env.HTTPClient(env.AdminKey), env.URL).Create(ctx, &poolsv1.CreateRequest{Name: "h100", NodeSelector: map[string]string{"gpu": "h100"}})
	if err != nil {
		t.Fatal(err)
	}
	c := leasesv1connect.NewLeasesServiceClient(env.HTTPClient(env.AdminKey), env.URL)
	req := &leasesv1.CreateRequest{PoolId: pool.GetPool().GetId(), Gpus: 1, Duration: durationpb.New(time.Hour)}
	var first string
	for i := range 2 {
		res, err := c.Create(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = res.GetLease().GetId()
		}
	}
	_, err = c.Create(ctx, req)
	refused(t, "lease", err, quota.PendingLeases)
	if _, err := c.Release(ctx, &leasesv1.ReleaseRequest{Id: first}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, req); err != nil {
		t.Fatalf("a lease once one pending lease was released: %v", err)
	}
}
