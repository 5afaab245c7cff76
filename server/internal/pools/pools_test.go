package pools_test

import (
	"context"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	poolsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/pools/v1/poolsv1connect"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/server/servertest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

var ctx = context.Background()

func client(env *servertest.Env) poolsv1connect.PoolsServiceClient {
	return poolsv1connect.NewPoolsServiceClient(env.HTTPClient(env.AdminKey), env.URL)
}

func wantField(t *testing.T, err error, code connect.Code, field string) {
	t.Helper()
	if connect.CodeOf(err) != code || !strings.Contains(err.Error(), ": "+field+":") {
		t.Fatalf("error %v, want %v naming %s", err, code, field)
	}
}

func TestPoolBadInput(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	c := client(env)
	if _, err := c.Create(ctx, &poolsv1.CreateRequest{Name: "gpus"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Create(ctx, &poolsv1.CreateRequest{Name: "gpus"})
	if connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Fatalf("duplicate name: %v", err)
	}
	_, err = c.Create(ctx, &poolsv1.CreateRequest{Name: "Not A Name"})
	wantField(t, err, connect.CodeInvalidArgument, "name")
	_, err = c.Create(ctx, &poolsv1.CreateRequest{Name: "sel", NodeSelector: map[string]string{"bad key!": "x"}})
	wantField(t, err, connect.CodeInvalidArgument, "node_selector")
	_, err = c.Create(ctx, &poolsv1.CreateRequest{Name: "ids", NodeIds: []string{"nope"}})
	wantField(t, err, connect.CodeInvalidArgument, "node_ids")
	_, err = c.Create(ctx, &poolsv1.CreateRequest{Name: "ids", NodeIds: []string{uuid.NewString()}})
	wantField(t, err, connect.CodeFailedPrecondition, "node_ids")
	neg := int32(-1)
	_, err = c.SetQuota(ctx, &poolsv1.SetQuotaRequest{PoolId: uuid.NewString(), Quota: &poolsv1.Quota{MaxGpus: &neg}})
	wantField(t, err, connect.CodeInvalidArgument, "quota.max_gpus")
	_, err = c.Get(ctx, &poolsv1.GetRequest{Id: uuid.NewString()})
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("get unknown: %v", err)
	}
	var pools int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM pools`).Scan(&pools); err != nil || pools != 1 {
		t.Fatalf("%d pools (%v), want only the first", pools, err)
	}
	// An empty pool can be deleted.
	list, _ := c.List(ctx, &poolsv1.ListRequest{})
	if _, err := c.Delete(ctx, &poolsv1.DeleteRequest{Id: list.GetPools()[0].GetId()}); err != nil {
		t.Fatal(err)
	}
}
