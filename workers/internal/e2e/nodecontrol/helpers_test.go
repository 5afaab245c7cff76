package nodecontrol_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1/nodesv1connect"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/server/servertest"
	"github.com/better-compute/better-compute/workers/internal/nodecontrol/nodecontroltest"
)

// These tests run the node controllers with the API (and, in gateway_test.go, a gateway and a
// daemon) in front of them: they drive nodes through NodesService and watch the reconcilers act.
func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// env is the API on a fresh database, a client of NodesService and the root tenant.
type env struct {
	*servertest.Env
	nodes  nodesv1connect.NodesServiceClient
	tenant uuid.UUID
}

func newFleet(t *testing.T) *env {
	t.Helper()
	api := servertest.New(t)
	root, err := auth.EnsureRootTenant(ctx, api.Pool)
	if err != nil {
		t.Fatal(err)
	}
	return &env{Env: api, nodes: nodesv1connect.NewNodesServiceClient(api.HTTPClient(api.AdminKey), api.URL), tenant: root.ID}
}

// The shared set-up of the node controllers' tests.
var (
	runWorkers = nodecontroltest.RunWorkers
	newNode    = nodecontroltest.NewNode
	hello      = nodecontroltest.Hello
	node       = nodecontroltest.Node
	condition  = nodecontroltest.Condition
	count      = nodecontroltest.Count
	events     = nodecontroltest.Events
)

// command is a command of a node, by type.
type command struct {
	ID      uuid.UUID
	Key     string
	State   string
	Payload string
}

func commands(t *testing.T, pool *pgxpool.Pool, node uuid.UUID, typ string) []command {
	t.Helper()
	rows, err := pool.Query(ctx, `SELECT id, idempotency_key, state, payload::text FROM commands WHERE node_id = $1 AND type = $2 ORDER BY id`, node, typ)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []command
	for rows.Next() {
		var c command
		if err := rows.Scan(&c.ID, &c.Key, &c.State, &c.Payload); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// finish ends a command as a daemon's result would.
func finish(t *testing.T, pool *pgxpool.Pool, id uuid.UUID, state, errMsg string) {
	t.Helper()
	if _, err := pool.Exec(ctx, `UPDATE commands SET state = $2, error = $3, finished_at = now(), updated_at = now() WHERE id = $1`, id, state, errMsg); err != nil {
		t.Fatal(err)
	}
}
