package nodes_test

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/better-compute/better-compute/gen/db"
	auditv1 "github.com/better-compute/better-compute/gen/go/bettercompute/audit/v1"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/server/servertest"
)

func countEvents(t *testing.T, pool *pgxpool.Pool, typ string, node uuid.UUID) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE type = $1 AND subject = $2`, typ, "node/"+node.String()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func queued(t *testing.T, pool *pgxpool.Pool, kind string, node uuid.UUID) bool {
	t.Helper()
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM reconcile_queue WHERE kind = $1 AND key = $2`, kind, node.String()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func wantPrecondition(t *testing.T, err error, state string) {
	t.Helper()
	wantCode(t, err, connect.CodeFailedPrecondition)
	if !strings.Contains(err.Error(), " is "+state+":") {
		t.Errorf("error %q does not name the current state %s", err, state)
	}
}

func TestLifecycleTransitions(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	tenant := tenantOf(t, env, env.AdminKey)
	id := insertNode(t, env.Pool, tenant, "a", `{}`)
	c := client(env, env.AdminKey)
	req := &nodesv1.CordonRequest{Id: id.String()}

	// joining -> cordoned, and cordoning again changes nothing.
	res, err := c.Cordon(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if n := res.GetNode(); n.GetState() != "cordoned" || n.GetStateChangeTime() == nil {
		t.Fatalf("cordoned node %v", n)
	}
	if !queued(t, env.Pool, fleet.KindLifecycle, id) {
		t.Error("cordon did not enqueue the node's lifecycle")
	}
	if _, err := c.Cordon(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := countEvents(t, env.Pool, "node.cordoned", id); n != 1 {
		t.Errorf("%d node.cordoned events, want 1", n)
	}
	// cordoned -> draining -> (the reconciler's drained, here by hand) -> retired.
	d, err := c.Drain(ctx, &nodesv1.DrainRequest{Id: id.String()})
	if err != nil || d.GetNode().GetState() != "draining" {
		t.Fatalf("drain: %v %v", d.GetNode(), err)
	}
	_, err = c.Retire(ctx, &nodesv1.RetireRequest{Id: id.String()})
	wantPrecondition(t, err, "draining")
	_, err = c.Cordon(ctx, req)
	wantPrecondition(t, err, "draining")
	if _, err := c.Drain(ctx, &nodesv1.DrainRequest{Id: id.String()}); err != nil {
		t.Fatal(err)
	}
	// draining -> ready.
	u, err := c.Uncordon(ctx, &nodesv1.UncordonRequest{Id: id.String()})
	if err != nil || u.GetNode().GetState() != "ready" {
		t.Fatalf("uncordon: %v %v", u.GetNode(), err)
	}
	if _, err := c.Uncordon(ctx, &nodesv1.UncordonRequest{Id: id.String()}); err != nil {
		t.Fatal(err)
	}
	// The daemon, told to drain, is told to take work again (once, though uncordoned twice).
	var undrains int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM commands WHERE node_id = $1 AND type = 'undrain'`, id).Scan(&undrains); err != nil || undrains != 1 {
		t.Errorf("%d undrain commands (%v), want 1", undrains, err)
	}
	_, err = c.Retire(ctx, &nodesv1.RetireRequest{Id: id.String()})
	wantPrecondition(t, err, "ready")
	if _, err := c.Drain(ctx, &nodesv1.DrainRequest{Id: id.String()}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Pool.Exec(ctx, `UPDATE nodes SET state = 'drained' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Drain(ctx, &nodesv1.DrainRequest{Id: id.String()}); err != nil {
		t.Fatalf("draining a drained node: %v", err)
	}
	r, err := c.Retire(ctx, &nodesv1.RetireRequest{Id: id.String()})
	if err != nil || r.GetNode().GetState() != "retired" {
		t.Fatalf("retire: %v %v", r.GetNode(), err)
	}
	if _, err := c.Retire(ctx, &nodesv1.RetireRequest{Id: id.String()}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Cordon(ctx, req)
	wantPrecondition(t, err, "retired")
	_, err = c.Uncordon(ctx, &nodesv1.UncordonRequest{Id: id.String()})
	wantPrecondition(t, err, "retired")
	_, err = c.Drain(ctx, &nodesv1.DrainRequest{Id: id.String()})
	wantPrecondition(t, err, "retired")

	for typ, want := range map[string]int{"node.cordoned": 1, "node.draining": 2, "node.uncordoned": 1, "node.retired": 1} {
		if n := countEvents(t, env.Pool, typ, id); n != want {
			t.Errorf("%d %s events, want %d", n, typ, want)
		}
	}
	var gen int64
	if err := env.Pool.QueryRow(ctx, `SELECT state_generation FROM nodes WHERE id = $1`, id).Scan(&gen); err != nil || gen != 5 {
		t.Errorf("state generation %d (%v), want 5 (the manual drained does not count)", gen, err)
	}
	a, err := env.Audit(env.AdminKey).List(ctx, &auditv1.ListRequest{Method: "nodes/drain"})
	if err != nil {
		t.Fatal(err)
	}
	// Four drains that succeeded (two changing nothing) and, newest, one refused.
	if ev := a.GetEvents(); len(ev) != 5 || ev[0].GetOutcome() != "failed_precondition" ||
		ev[1].GetTarget() != "node/"+id.String() || ev[1].GetOutcome() != "ok" {
		t.Errorf("audit rows %v", ev)
	}

	_, err = c.Cordon(ctx, &nodesv1.CordonRequest{Id: "x"})
	wantField(t, err, "id")
	_, err = c.Drain(ctx, &nodesv1.DrainRequest{Id: uuid.NewString()})
	wantCode(t, err, connect.CodeNotFound)
}

func TestLifecyclePermissions(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	tenant := tenantOf(t, env, env.AdminKey)
	id := insertNode(t, env.Pool, tenant, "a", `{}`)
	iam := env.IAM(env.AdminKey)
	p, err := iam.CreatePrincipal(ctx, &iamv1.CreatePrincipalRequest{Kind: iamv1.PrincipalKind_PRINCIPAL_KIND_SERVICE_ACCOUNT, Name: "operator"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := iam.CreateRoleBinding(ctx, &iamv1.CreateRoleBindingRequest{PrincipalId: p.GetPrincipal().GetId(), Role: iamv1.Role_ROLE_OPERATOR}); err != nil {
		t.Fatal(err)
	}
	k, err := iam.CreateApiKey(ctx, &iamv1.CreateApiKeyRequest{PrincipalId: p.GetPrincipal().GetId()})
	if err != nil {
		t.Fatal(err)
	}
	op := client(env, k.GetKey())
	// An operator cordons, drains and uncordons (nodes.operate), but neither retires
	// (nodes.delete) nor labels or changes specs (nodes.write).
	if _, err := op.Cordon(ctx, &nodesv1.CordonRequest{Id: id.String()}); err != nil {
		t.Fatal(err)
	}
	if _, err := op.Drain(ctx, &nodesv1.DrainRequest{Id: id.String()}); err != nil {
		t.Fatal(err)
	}
	if _, err := op.Uncordon(ctx, &nodesv1.UncordonRequest{Id: id.String()}); err != nil {
		t.Fatal(err)
	}
	_, err = op.Retire(ctx, &nodesv1.RetireRequest{Id: id.String()})
	wantCode(t, err, connect.CodePermissionDenied)
	_, err = op.Label(ctx, &nodesv1.LabelRequest{Id: id.String(), Set: map[string]string{"a": "b"}})
	wantCode(t, err, connect.CodePermissionDenied)
	_, err = op.UpdateSpec(ctx, &nodesv1.UpdateSpecRequest{Id: id.String(), Spec: &nodesv1.NodeSpec{}})
	wantCode(t, err, connect.CodePermissionDenied)
	if _, err := op.InventoryHistory(ctx, &nodesv1.InventoryHistoryRequest{Id: id.String()}); err != nil {
		t.Fatal(err)
	}
}

func TestLabel(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	tenant := tenantOf(t, env, env.AdminKey)
	id := insertNode(t, env.Pool, tenant, "a", `{"zone": "eu-1", "gpu": "a100"}`)
	c := client(env, env.AdminKey)

	res, err := c.Label(ctx, &nodesv1.LabelRequest{Id: id.String(), Set: map[string]string{"gpu": "h100", "rack": "r7"}, Remove: []string{"zone", "absent"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := res.GetNode().GetLabels(), map[string]string{"gpu": "h100", "rack": "r7"}; !maps.Equal(got, want) {
		t.Errorf("labels %v, want %v", got, want)
	}
	if res.GetNode().GetSpecGeneration() != 1 {
		t.Errorf("labelling a node whose spec does not manage labels changed the spec: %v", res.GetNode().GetSpec())
	}
	// Removing what is not there changes nothing and emits nothing.
	if _, err := c.Label(ctx, &nodesv1.LabelRequest{Id: id.String(), Remove: []string{"zone"}}); err != nil {
		t.Fatal(err)
	}
	if n := countEvents(t, env.Pool, "node.labeled", id); n != 1 {
		t.Errorf("%d node.labeled events, want 1", n)
	}

	_, err = c.Label(ctx, &nodesv1.LabelRequest{Id: id.String(), Set: map[string]string{"bad key": "x"}})
	wantField(t, err, "set")
	_, err = c.Label(ctx, &nodesv1.LabelRequest{Id: id.String(), Set: map[string]string{"a": "b"}, Remove: []string{"a"}})
	wantField(t, err, "remove")
	_, err = c.Label(ctx, &nodesv1.LabelRequest{Id: id.String(), Remove: []string{"-bad"}})
	wantField(t, err, "remove")
	_, err = c.Label(ctx, &nodesv1.LabelRequest{Id: id.String()})
	wantField(t, err, "set")
	many := map[string]string{}
	for i := range 63 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	_, err = c.Label(ctx, &nodesv1.LabelRequest{Id: id.String(), Set: many})
	wantField(t, err, "set")

	// When the spec manages the labels, labelling changes the spec the same way.
	if _, err := c.UpdateSpec(ctx, &nodesv1.UpdateSpecRequest{Id: id.String(), Spec: &nodesv1.NodeSpec{
		Labels: &nodesv1.LabelSet{Values: map[string]string{"gpu": "h100"}},
	}}); err != nil {
		t.Fatal(err)
	}
	res, err = c.Label(ctx, &nodesv1.LabelRequest{Id: id.String(), Set: map[string]string{"tier": "gold"}})
	if err != nil {
		t.Fatal(err)
	}
	n := res.GetNode()
	if got, want := n.GetSpec().GetLabels().GetValues(), map[string]string{"gpu": "h100", "tier": "gold"}; !maps.Equal(got, want) || n.GetSpecGeneration() != 3 {
		t.Errorf("spec labels %v at generation %d, want %v at 3", got, n.GetSpecGeneration(), want)
	}
	if got, want := n.GetLabels(), map[string]string{"gpu": "h100", "rack": "r7", "tier": "gold"}; !maps.Equal(got, want) {
		t.Errorf("labels %v, want %v", got, want)
	}
}

func TestUpdateSpec(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	tenant := tenantOf(t, env, env.AdminKey)
	id := insertNode(t, env.Pool, tenant, "a", `{}`)
	c := client(env, env.AdminKey)

	got, err := c.Get(ctx, &nodesv1.GetRequest{Id: id.String()})
	if err != nil {
		t.Fatal(err)
	}
	if n := got.GetNode(); n.GetSpecGeneration() != 1 || n.GetObservedGeneration() != 0 || n.GetSpec().GetLabels() != nil || n.GetSpec().GetConfig() != nil {
		t.Fatalf("new node spec %v generation %d observed %d", n.GetSpec(), n.GetSpecGeneration(), n.GetObservedGeneration())
	}
	config, _ := structpb.NewStruct(map[string]any{"logLevel": "debug", "limits": map[string]any{"pids": 4096}})
	spec := &nodesv1.NodeSpec{
		Labels:        &nodesv1.LabelSet{},
		Taints:        []*nodesv1.Taint{{Key: "dedicated", Value: "ml", Effect: "NoSchedule"}, {Key: "maintenance", Effect: "NoExecute"}},
		DaemonVersion: "2.1.0",
		Config:        config,
	}
	res, err := c.UpdateSpec(ctx, &nodesv1.UpdateSpecRequest{Id: id.String(), Spec: spec, ExpectedGeneration: 1})
	if err != nil {
		t.Fatal(err)
	}
	n := res.GetNode()
	if n.GetSpecGeneration() != 2 || n.GetSpec().GetDaemonVersion() != "2.1.0" || len(n.GetSpec().GetTaints()) != 2 ||
		n.GetSpec().GetLabels() == nil || len(n.GetSpec().GetLabels().GetValues()) != 0 ||
		n.GetSpec().GetConfig().GetFields()["limits"].GetStructValue().GetFields()["pids"].GetNumberValue() != 4096 {
		t.Fatalf("updated spec %v at generation %d", n.GetSpec(), n.GetSpecGeneration())
	}
	if !queued(t, env.Pool, fleet.KindSpec, id) {
		t.Error("the spec update did not enqueue the NodeSpec reconciler")
	}
	// The same spec again changes nothing.
	res, err = c.UpdateSpec(ctx, &nodesv1.UpdateSpecRequest{Id: id.String(), Spec: spec})
	if err != nil || res.GetNode().GetSpecGeneration() != 2 {
		t.Fatalf("same spec: generation %d, %v", res.GetNode().GetSpecGeneration(), err)
	}
	if n := countEvents(t, env.Pool, "node.spec.updated", id); n != 1 {
		t.Errorf("%d node.spec.updated events, want 1", n)
	}
	_, err = c.UpdateSpec(ctx, &nodesv1.UpdateSpecRequest{Id: id.String(), Spec: &nodesv1.NodeSpec{}, ExpectedGeneration: 1})
	wantCode(t, err, connect.CodeFailedPrecondition)

	for _, tc := range []struct {
		spec  *nodesv1.NodeSpec
		field string
	}{
		{nil, "spec"},
		{&nodesv1.NodeSpec{Labels: &nodesv1.LabelSet{Values: map[string]string{"a": "-"}}}, "spec.labels"},
		{&nodesv1.NodeSpec{Taints: []*nodesv1.Taint{{Key: "a", Effect: "Sometimes"}}}, "spec.taints[0].effect"},
		{&nodesv1.NodeSpec{Taints: []*nodesv1.Taint{{Key: "", Effect: "NoSchedule"}}}, "spec.taints[0].key"},
		{&nodesv1.NodeSpec{Taints: []*nodesv1.Taint{{Key: "a", Value: "b c", Effect: "NoSchedule"}}}, "spec.taints[0].value"},
		{&nodesv1.NodeSpec{Taints: []*nodesv1.Taint{{Key: "a", Effect: "NoSchedule"}, {Key: "a", Value: "x", Effect: "NoSchedule"}}}, "spec.taints[1]"},
		{&nodesv1.NodeSpec{DaemonVersion: "1.0 beta"}, "spec.daemon_version"},
	} {
		_, err := c.UpdateSpec(ctx, &nodesv1.UpdateSpecRequest{Id: id.String(), Spec: tc.spec})
		wantCode(t, err, connect.CodeInvalidArgument)
		var cerr *connect.Error
		if errors.As(err, &cerr) && !strings.HasPrefix(cerr.Message(), tc.field+": ") {
			t.Errorf("spec %v: message %q does not name %s", tc.spec, cerr.Message(), tc.field)
		}
	}
	got, err = c.Get(ctx, &nodesv1.GetRequest{Id: id.String()})
	if err != nil || got.GetNode().GetSpecGeneration() != 2 {
		t.Errorf("refused updates changed the spec: generation %d, %v", got.GetNode().GetSpecGeneration(), err)
	}
}

func TestInventoryHistory(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	tenant := tenantOf(t, env, env.AdminKey)
	id := insertNode(t, env.Pool, tenant, "a", `{}`)
	q := db.New(env.Pool)
	hello := func(inv *daemonv1.Inventory) bool {
		t.Helper()
		b, err := protojson.Marshal(inv)
		if err != nil {
			t.Fatal(err)
		}
		r, err := q.RecordNodeHello(ctx, db.RecordNodeHelloParams{ID: id, DaemonVersion: "1.0.0", Inventory: b})
		if err != nil {
			t.Fatal(err)
		}
		return r.InventoryChanged
	}
	a := &daemonv1.Inventory{Hostname: "a", Cpus: 8, MemoryBytes: 32 << 30, Gpus: []*daemonv1.Gpu{{Index: 0, Model: "H100", Uuid: "GPU-0"}}}
	b := &daemonv1.Inventory{Hostname: "a", Cpus: 8, MemoryBytes: 32 << 30, Gpus: []*daemonv1.Gpu{{Index: 0, Model: "H100", Uuid: "GPU-0"}, {Index: 1, Model: "H100", Uuid: "GPU-1"}}}
	for i, tc := range []struct {
		inv     *daemonv1.Inventory
		changed bool
	}{{a, true}, {a, false}, {b, true}, {b, false}, {a, true}} {
		if got := hello(tc.inv); got != tc.changed {
			t.Errorf("hello %d: changed %v, want %v", i, got, tc.changed)
		}
	}
	if n := countEvents(t, env.Pool, "node.inventory.changed", id); n != 3 {
		t.Errorf("%d node.inventory.changed events, want 3", n)
	}
	if n := countEvents(t, env.Pool, "node.ready", id); n != 1 {
		t.Errorf("%d node.ready events, want 1", n)
	}

	c := client(env, env.AdminKey)
	var gpus []int
	tok := ""
	for {
		res, err := c.InventoryHistory(ctx, &nodesv1.InventoryHistoryRequest{Id: id.String(), PageSize: 2, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.GetRecords() {
			if r.GetRecordTime() == nil || r.GetInventory().GetCpus() != 8 {
				t.Errorf("record %v", r)
			}
			gpus = append(gpus, len(r.GetInventory().GetGpus()))
		}
		if tok = res.GetNextPageToken(); tok == "" {
			break
		}
	}
	if fmt.Sprint(gpus) != "[1 2 1]" {
		t.Errorf("history (GPUs per record, newest first) %v, want [1 2 1]", gpus)
	}
	got, err := c.Get(ctx, &nodesv1.GetRequest{Id: id.String()})
	if err != nil || len(got.GetNode().GetInventory().GetGpus()) != 1 || got.GetNode().GetState() != "ready" {
		t.Errorf("get: %v %v", got.GetNode(), err)
	}

	other, err := env.IAM(env.AdminKey).CreateTenant(ctx, &iamv1.CreateTenantRequest{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client(env, other.GetOwnerApiKey()).InventoryHistory(ctx, &nodesv1.InventoryHistoryRequest{Id: id.String()})
	wantCode(t, err, connect.CodeNotFound)
	_, err = c.InventoryHistory(ctx, &nodesv1.InventoryHistoryRequest{Id: id.String(), PageToken: "garbage!"})
	wantField(t, err, "page_token")
}
