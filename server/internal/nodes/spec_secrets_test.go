package nodes_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"connectrpc.com/connect"

	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/server/internal/nodes"
	"github.com/better-compute/better-compute/server/servertest"
)

// TestSpecSecrets: a spec's secret names are validated, stored as a sorted set in nodes.spec
// (where the gateway reads them) and read back.
func TestSpecSecrets(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	tenant := tenantOf(t, env, env.AdminKey)
	id := insertNode(t, env.Pool, tenant, "a", `{}`)
	c := client(env, env.AdminKey)

	res, err := c.UpdateSpec(ctx, &nodesv1.UpdateSpecRequest{Id: id.String(), Spec: &nodesv1.NodeSpec{Secrets: []string{"z", "db/password", "z"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.GetNode().GetSpec().GetSecrets(); !slices.Equal(got, []string{"db/password", "z"}) || res.GetNode().GetSpecGeneration() != 2 {
		t.Fatalf("spec secrets %v at generation %d", got, res.GetNode().GetSpecGeneration())
	}
	var stored string
	if err := env.Pool.QueryRow(ctx, "SELECT spec->>'secrets' FROM nodes WHERE id = $1", id).Scan(&stored); err != nil || stored != `["db/password", "z"]` {
		t.Fatalf("nodes.spec secrets %s (%v)", stored, err)
	}
	// The same set in another order is the same spec.
	res, err = c.UpdateSpec(ctx, &nodesv1.UpdateSpecRequest{Id: id.String(), Spec: &nodesv1.NodeSpec{Secrets: []string{"z", "db/password"}}})
	if err != nil || res.GetNode().GetSpecGeneration() != 2 {
		t.Fatalf("same set: generation %d, %v", res.GetNode().GetSpecGeneration(), err)
	}

	tooMany := make([]string, nodes.MaxSecrets+1)
	for i := range tooMany {
		tooMany[i] = "s" + strings.Repeat("x", i%50)
	}
	for _, tc := range []struct {
		secrets []string
		field   string
	}{
		{[]string{"ok", "not ok"}, "spec.secrets[1]"},
		{[]string{""}, "spec.secrets[0]"},
		{tooMany, "spec.secrets"},
	} {
		_, err := c.UpdateSpec(ctx, &nodesv1.UpdateSpecRequest{Id: id.String(), Spec: &nodesv1.NodeSpec{Secrets: tc.secrets}})
		wantCode(t, err, connect.CodeInvalidArgument)
		var cerr *connect.Error
		if errors.As(err, &cerr) && !strings.HasPrefix(cerr.Message(), tc.field+": ") {
			t.Errorf("secrets %v: message %q does not name %s", tc.secrets, cerr.Message(), tc.field)
		}
	}
	// An empty list grants nothing again.
	res, err = c.UpdateSpec(ctx, &nodesv1.UpdateSpecRequest{Id: id.String(), Spec: &nodesv1.NodeSpec{}})
	if err != nil || len(res.GetNode().GetSpec().GetSecrets()) != 0 || res.GetNode().GetSpecGeneration() != 3 {
		t.Fatalf("cleared: %v, %v", res.GetNode().GetSpec(), err)
	}
}
