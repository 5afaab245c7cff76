package capacity_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/capacity"
	"github.com/better-compute/better-compute/internal/capacity/capacitytest"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/event"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// emitted is what an Emitter was given.
type emitted struct {
	tenant uuid.UUID
	ev     event.Event
}

// EndLeases emits one event per lease whose state it changed, every field filled the same way,
// and none for a preempted lease it frees early or a lease that had already ended.
func TestEndLeasesEmitsForTheLeasesItEnds(t *testing.T) {
	t.Parallel()
	pool := dbtest.Pool(t)
	ctx := t.Context()
	tenant := capacitytest.RootTenant(t, pool)
	nodes := capacitytest.Nodes(t, pool, tenant, 1, capacitytest.NodeSpec{CPUs: 8, MemoryBytes: 32 << 30})
	poolID := capacitytest.Pool(t, pool, tenant, "p", nil, nodes...)
	ids := capacitytest.Leases(t, pool, tenant, poolID, 3, capacitytest.LeaseSpec{CPUs: 1})
	pending, placed, preempted := ids[0], ids[1], ids[2]
	for _, st := range []struct {
		sql  string
		args []any
	}{
		{`UPDATE pool_leases SET state = 'placed', placed_at = now(), ends_at = now() + interval '1 hour' WHERE id = $1`, []any{placed}},
		{`UPDATE pool_leases SET state = 'preempted', reason = 'preempted', placed_at = now(), preempted_at = now(),
			ends_at = now() + interval '30 seconds' WHERE id = $1`, []any{preempted}},
		{`INSERT INTO allocations (lease_id, node_id, cpus, started_at, metered_until)
			SELECT id, $2, 1, now(), now() FROM unnest($1::uuid[]) AS id`, []any{[]uuid.UUID{placed, preempted}, nodes[0]}},
	} {
		if _, err := pool.Exec(ctx, st.sql, st.args...); err != nil {
			t.Fatalf("%s: %v", st.sql, err)
		}
	}

	end := func(state capacity.LeaseState) ([]db.EndPoolLeasesRow, []emitted) {
		t.Helper()
		var (
			rows []db.EndPoolLeasesRow
			got  []emitted
		)
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			rows, err = capacity.EndLeases(ctx, db.New(tx), ids, state, "done", nil, func(tenant uuid.UUID, ev event.Event) error {
				got = append(got, emitted{tenant, ev})
				return nil
			})
			return err
		})
		if err != nil {
			t.Fatalf("end leases as %s: %v", state, err)
		}
		return rows, got
	}
	if _, err := capacity.EndLeases(ctx, db.New(pool), ids, capacity.LeasePlaced, "", nil, nil); err == nil {
		t.Error("ending leases as placed succeeded")
	}

	rows, got := end(capacity.LeaseReleased)
	if len(rows) != 3 {
		t.Fatalf("ended %d leases, want 3 (the preempted one too)", len(rows))
	}
	ended := map[uuid.UUID]db.EndPoolLeasesRow{}
	for _, r := range rows {
		ended[r.ID] = r
	}
	want := []emitted{}
	for _, l := range []struct {
		id       uuid.UUID
		previous string
		nodes    []uuid.UUID
	}{{pending, "pending", []uuid.UUID{}}, {placed, "placed", nodes}} {
		want = append(want, emitted{tenant, event.LeaseReleased{LeaseChange: event.LeaseChange{
			ID: l.id, PoolID: poolID, State: "released", PreviousState: l.previous, Reason: "done",
			NodeIDs: l.nodes, EndTime: ended[l.id].EndedAt,
		}}})
	}
	slices.SortFunc(got, func(a, b emitted) int { return strings.Compare(a.ev.Subject(), b.ev.Subject()) })
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events %+v, want %+v", got, want)
	}
	if ended[preempted].State != capacity.LeasePreempted || ended[preempted].EndedAt == nil {
		t.Errorf("the preempted lease ended as %+v, want preempted with an end", ended[preempted])
	}

	if rows, got := end(capacity.LeaseFailed); len(rows) != 0 || len(got) != 0 {
		t.Errorf("ending ended leases again: %d rows, %d events", len(rows), len(got))
	}
}
