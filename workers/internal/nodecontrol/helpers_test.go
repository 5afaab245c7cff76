package nodecontrol_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/workers/internal/nodecontrol/nodecontroltest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

// env is a fresh database and its root tenant. Tests that drive nodes through the API are in
// workers/internal/e2e/nodecontrol.
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

// The shared set-up of the node controllers' tests.
var (
	runWorkers = nodecontroltest.RunWorkers
	newNode    = nodecontroltest.NewNode
	node       = nodecontroltest.Node
	condition  = nodecontroltest.Condition
	count      = nodecontroltest.Count
	events     = nodecontroltest.Events
)
