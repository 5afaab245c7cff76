// Package nodecontroltest sets up the node controllers and their nodes for tests: the unit tests
// of nodecontrol and the end-to-end tests that drive nodes through the API share it.
package nodecontroltest

import (
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/better-compute/better-compute/gen/db"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/locks"
	"github.com/better-compute/better-compute/workers"
	"github.com/better-compute/better-compute/workers/internal/nodecontrol"
	"github.com/better-compute/better-compute/workers/workerstest"
)

// RunWorkers runs the controllers role with the node reconcilers and jobs until the test ends.
func RunWorkers(t testing.TB, pool *pgxpool.Pool, opts nodecontrol.Options, jobs ...locks.Job) {
	t.Helper()
	workerstest.Run(t, workerstest.Options{
		Pool: pool, Roles: []string{workers.RoleControllers},
		Reconcilers: nodecontrol.Reconcilers(pool, opts),
		Jobs:        map[string][]locks.Job{workers.RoleControllers: jobs},
	})
}

// NewNode creates a node as a join does; with version set it also says hello, so it is ready.
func NewNode(t testing.TB, pool *pgxpool.Pool, tenant uuid.UUID, hostname, version string) uuid.UUID {
	t.Helper()
	id := uuid.Must(uuid.NewV7())
	if _, err := db.New(pool).CreateNode(t.Context(), db.CreateNodeParams{ID: id, TenantID: tenant, Hostname: hostname, Labels: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if version != "" {
		Hello(t, pool, id, version, &daemonv1.Inventory{Hostname: hostname, Cpus: 4})
	}
	return id
}

// Hello records a daemon's hello for node id, as the gateway does when a session opens.
func Hello(t testing.TB, pool *pgxpool.Pool, id uuid.UUID, version string, inv *daemonv1.Inventory) {
	t.Helper()
	b, err := protojson.Marshal(inv)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.New(pool).RecordNodeHello(t.Context(), db.RecordNodeHelloParams{ID: id, DaemonVersion: version, Inventory: b}); err != nil {
		t.Fatal(err)
	}
}

// Node reads node id.
func Node(t testing.TB, pool *pgxpool.Pool, id uuid.UUID) db.Node {
	t.Helper()
	n, err := db.New(pool).GetNodeForGateway(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Condition is n's condition of type typ, the zero Condition when it has none.
func Condition(t testing.TB, n db.Node, typ string) fleet.Condition {
	t.Helper()
	cs, err := fleet.DecodeConditions(n.Conditions)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := fleet.FindCondition(cs, typ)
	return c
}

// Count runs a query that returns one count.
func Count(t testing.TB, pool *pgxpool.Pool, query string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Events counts the outbox events of type typ about node id.
func Events(t testing.TB, pool *pgxpool.Pool, typ string, id uuid.UUID) int {
	t.Helper()
	return Count(t, pool, `SELECT count(*) FROM outbox WHERE type = $1 AND subject = $2`, typ, "node/"+id.String())
}
