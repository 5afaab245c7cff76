package nodecontrol_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/better-compute/better-compute/gen/db"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/workers"
	"github.com/better-compute/better-compute/internal/workers/locks"
	"github.com/better-compute/better-compute/internal/workers/nodecontrol"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// env is a fresh database and its root tenant. Tests that drive nodes through the API are in
// internal/e2e/nodecontrol.
type env struct {
	Pool   *pgxpool.Pool
	tenant uuid.UUID
}

func newFleet(t *testing.T) *env {
	t.Helper()
	pool := dbtest.Pool(t)
	root, err := auth.EnsureRootTenant(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	return &env{Pool: pool, tenant: root.ID}
}

// runWorkers runs the controllers role with the node reconcilers and jobs until the test ends.
func runWorkers(t *testing.T, pool *pgxpool.Pool, opts nodecontrol.Options, jobs ...locks.Job) {
	t.Helper()
	rt := workers.New(workers.Options{
		Pool: pool, Roles: map[string]bool{workers.RoleControllers: true},
		Reconcilers: nodecontrol.Reconcilers(pool, opts),
		Jobs:        map[string][]locks.Job{workers.RoleControllers: jobs},
	})
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); rt.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// newNode creates a node as a join does; with version set it also says hello, so it is ready.
func newNode(t *testing.T, pool *pgxpool.Pool, tenant uuid.UUID, hostname, version string) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	q := db.New(pool)
	if _, err := q.CreateNode(ctx, db.CreateNodeParams{ID: id, TenantID: tenant, Hostname: hostname, Labels: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if version != "" {
		hello(t, pool, id, version, &daemonv1.Inventory{Hostname: hostname, Cpus: 4})
	}
	return id
}

func hello(t *testing.T, pool *pgxpool.Pool, id uuid.UUID, version string, inv *daemonv1.Inventory) {
	t.Helper()
	b, err := protojson.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.New(pool).RecordNodeHello(ctx, db.RecordNodeHelloParams{ID: id, DaemonVersion: version, Inventory: b}); err != nil {
		t.Fatal(err)
	}
}

func node(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) db.Node {
	t.Helper()
	n, err := db.New(pool).GetNodeForGateway(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func condition(t *testing.T, n db.Node, typ string) fleet.Condition {
	t.Helper()
	cs, err := fleet.DecodeConditions(n.Conditions)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := fleet.FindCondition(cs, typ)
	return c
}

func count(t *testing.T, pool *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func events(t *testing.T, pool *pgxpool.Pool, typ string, id uuid.UUID) int {
	t.Helper()
	return count(t, pool, `SELECT count(*) FROM outbox WHERE type = $1 AND subject = $2`, typ, "node/"+id.String())
}
