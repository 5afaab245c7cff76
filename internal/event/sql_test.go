package event

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestSQLEventsDecode runs the statements that write their own events (a hello, liveness, a
// collected inventory) and decodes every payload they wrote strictly into its catalog type,
// with every key of the catalog present.
func TestSQLEventsDecode(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := dbtest.Pool(t)
	q := db.New(pool)
	if err := q.EnsureRootTenant(ctx, db.EnsureRootTenantParams{ID: uuid.New(), Name: "root", DisplayName: "Root"}); err != nil {
		t.Fatal(err)
	}
	root, err := q.GetRootTenant(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tenant := root.ID
	node := uuid.New()
	if _, err := q.CreateNode(ctx, db.CreateNodeParams{ID: node, TenantID: tenant, Hostname: "h\"1", Labels: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.RecordNodeHello(ctx, db.RecordNodeHelloParams{ID: node, DaemonVersion: "1.0.0", Inventory: []byte(`{"hostname":"h"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.MarkNodesOnline(ctx, db.MarkNodesOnlineParams{ThresholdMs: 60_000, Lim: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.MarkNodesOffline(ctx, db.MarkNodesOfflineParams{ThresholdMs: -60_000, Lim: 10}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.RecordNodeInventory(ctx, db.RecordNodeInventoryParams{ID: node, Inventory: []byte(`{"hostname":"h2"}`)}); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, "SELECT type, subject, payload::text FROM outbox WHERE tenant_id = $1 ORDER BY id", tenant)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	byName := map[string]int{}
	for i, s := range catalog {
		byName[s.Name] = i
	}
	var types []string
	for rows.Next() {
		var typ, subject, payload string
		if err := rows.Scan(&typ, &subject, &payload); err != nil {
			t.Fatal(err)
		}
		types = append(types, typ)
		i, ok := byName[typ]
		if !ok {
			t.Errorf("%s is not in the catalog", typ)
			continue
		}
		v := reflect.New(reflect.TypeOf(all[i]))
		dec := json.NewDecoder(bytes.NewReader([]byte(payload)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v.Interface()); err != nil {
			t.Errorf("%s payload %s: %v", typ, payload, err)
			continue
		}
		if ev := v.Elem().Interface().(Event); ev.Subject() != subject || subject != "node/"+node.String() {
			t.Errorf("%s subject %q, the payload says %q", typ, subject, ev.Subject())
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(payload), &m); err != nil {
			t.Fatal(err)
		}
		for _, f := range catalog[i].Fields {
			if _, ok := m[f.Name]; !ok && !f.Optional {
				t.Errorf("%s payload %s has no %s", typ, payload, f.Name)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"node.ready", "node.inventory.changed", "node.online", "node.offline", "node.inventory.changed"}; !slices.Equal(types, want) {
		t.Errorf("events %v, want %v", types, want)
	}
}
