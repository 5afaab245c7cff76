package gateway_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gateway"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/quota"
)

// raceJoins runs n concurrent joins with token and returns how many ended with each code.
func raceJoins(t *testing.T, e *env, addr, token string, n int) map[connect.Code]int {
	t.Helper()
	var mu sync.Mutex
	codes := map[connect.Code]int{}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			_, err := daemon.Dialer{Gateway: addr}.Join(ctx, e.bundle.RootPEM(), token, "racer")
			code := connect.CodeOf(err)
			switch {
			case err == nil:
				code = 0
			case code == connect.CodeResourceExhausted && !strings.Contains(err.Error(), quota.Nodes.Key()):
				t.Errorf("refusal names no cap: %v", err)
			case code != connect.CodeResourceExhausted && code != connect.CodeUnauthenticated:
				t.Errorf("join: %v", err)
			}
			mu.Lock()
			codes[code]++
			mu.Unlock()
		})
	}
	wg.Wait()
	return codes
}

// nodeCounts returns the tenant's node counter and the count of its nodes that count.
func (e *env) nodeCounts() (counter, real int64) {
	e.t.Helper()
	if err := e.pool.QueryRow(ctx, `
		SELECT (SELECT COALESCE(sum(nodes), 0) FROM tenant_node_counts WHERE tenant_id = $1)::bigint,
		       (SELECT count(*) FROM nodes WHERE tenant_id = $1 AND revoked_at IS NULL AND state <> 'retired')`,
		e.tenant).Scan(&counter, &real); err != nil {
		e.t.Fatal(err)
	}
	return counter, real
}

func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	if _, err := e.pool.Exec(ctx, sql, args...); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
}

// TestConcurrentJoinsNeverPassTheNodeCap races many joins at a small cap: exactly the cap join,
// every refusal spends nothing, and the tenant's node counter equals its nodes that count, then
// too after a revoke, a retirement, a delete and heartbeats, and the cap admits exactly the room
// they made.
func TestConcurrentJoinsNeverPassTheNodeCap(t *testing.T) {
	t.Parallel()
	const limit, racers = 4, 16
	e := newEnv(t)
	gw := e.StartGateway("gw-counters", func(o *gateway.Options) { o.TenantNodes = limit })
	token := e.token(100, time.Now().Add(time.Hour))

	codes := raceJoins(t, e, gw.Addr, token, racers)
	if codes[0] != limit || codes[connect.CodeResourceExhausted] != racers-limit {
		t.Fatalf("joins ended %v, want %d ok and %d resource_exhausted", codes, limit, racers-limit)
	}
	if c, r := e.nodeCounts(); c != limit || r != limit {
		t.Fatalf("node counter %d, nodes %d, want %d", c, r, limit)
	}
	var uses int
	if err := e.pool.QueryRow(ctx, "SELECT uses FROM join_tokens").Scan(&uses); err != nil || uses != limit {
		t.Fatalf("token uses %d (%v), want %d", uses, err, limit)
	}
	var outbox int
	if err := e.pool.QueryRow(ctx, "SELECT count(*) FROM outbox WHERE type = 'node.joined'").Scan(&outbox); err != nil || outbox != limit {
		t.Fatalf("%d node.joined events (%v), want %d", outbox, err, limit)
	}

	// Heartbeats fire nothing; a revoke, a retirement and a delete each make room for one.
	versions := func() (v string) {
		if err := e.pool.QueryRow(ctx, "SELECT string_agg(xmin::text, ',' ORDER BY added) FROM tenant_node_counts").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := versions()
	e.exec(`INSERT INTO node_liveness (node_id, last_seen_at) SELECT id, now() FROM nodes WHERE tenant_id = $1
		ON CONFLICT (node_id) DO UPDATE SET last_seen_at = now()`, e.tenant)
	if after := versions(); after != before {
		t.Fatalf("heartbeats rewrote the node counters (row versions %s, then %s)", before, after)
	}
	e.exec("UPDATE nodes SET revoked_at = now() WHERE id = (SELECT id FROM nodes WHERE tenant_id = $1 ORDER BY id LIMIT 1)", e.tenant)
	e.exec("UPDATE nodes SET revoked_at = now() WHERE revoked_at IS NOT NULL") // again: no change of counting
	e.exec("UPDATE nodes SET state = 'retired' WHERE id = (SELECT id FROM nodes WHERE revoked_at IS NULL ORDER BY id LIMIT 1)")
	e.exec("UPDATE nodes SET state = 'ready' WHERE state = 'retired'")
	e.exec("UPDATE nodes SET state = 'retired' WHERE id = (SELECT id FROM nodes WHERE revoked_at IS NULL ORDER BY id LIMIT 1)")
	e.exec("DELETE FROM nodes WHERE id = (SELECT id FROM nodes WHERE revoked_at IS NULL AND state <> 'retired' ORDER BY id LIMIT 1)")
	e.exec("DELETE FROM nodes WHERE revoked_at IS NOT NULL") // no longer counted: takes nothing
	if c, r := e.nodeCounts(); c != 1 || r != 1 {
		t.Fatalf("after a revoke, a retirement and a delete: node counter %d, nodes %d, want 1", c, r)
	}

	codes = raceJoins(t, e, gw.Addr, token, racers)
	if codes[0] != limit-1 || codes[connect.CodeResourceExhausted] != racers-limit+1 {
		t.Fatalf("joins ended %v, want %d ok and %d resource_exhausted", codes, limit-1, racers-limit+1)
	}
	if c, r := e.nodeCounts(); c != limit || r != limit {
		t.Fatalf("node counter %d, nodes %d, want %d", c, r, limit)
	}
}

// TestConcurrentJoinsUseATokenUpExactly races joins at a token with a few uses left: exactly
// those join, the others are refused as unauthenticated and leave no node behind.
func TestConcurrentJoinsUseATokenUpExactly(t *testing.T) {
	t.Parallel()
	const uses, racers = 3, 12
	e := newEnv(t)
	gw := e.StartGateway("gw-uses", nil)
	token := e.token(uses, time.Now().Add(time.Hour))
	codes := raceJoins(t, e, gw.Addr, token, racers)
	if codes[0] != uses || codes[connect.CodeUnauthenticated] != racers-uses {
		t.Fatalf("joins ended %v, want %d ok and %d unauthenticated", codes, uses, racers-uses)
	}
	if c, r := e.nodeCounts(); c != uses || r != uses {
		t.Fatalf("node counter %d, nodes %d, want %d", c, r, uses)
	}
}

// TestDeletingATenantTakesItsCounters: a tenant's delete cascades through its live nodes, whose
// triggers update counters going in the same delete, and its commands' counts.
func TestDeletingATenantTakesItsCounters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	doomed := uuid.Must(uuid.NewV7())
	e.exec(`INSERT INTO tenants (id, parent_id, name) VALUES ($1, $2, 'doomed')`, doomed, e.tenant)
	e.exec(`INSERT INTO nodes (id, tenant_id) SELECT gen_random_uuid(), $1 FROM generate_series(1, 3)`, doomed)
	e.exec(`UPDATE nodes SET state = 'retired' WHERE id = (SELECT id FROM nodes WHERE tenant_id = $1 ORDER BY id LIMIT 1)`, doomed)
	e.exec(`INSERT INTO commands (id, tenant_id, node_id, type, idempotency_key, deadline)
		SELECT gen_random_uuid(), tenant_id, id, 'echo', 'k', now() + interval '1 hour' FROM nodes WHERE tenant_id = $1`, doomed)
	e.exec(`DELETE FROM tenants WHERE id = $1`, doomed)
	var left int
	if err := e.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM tenant_node_counts WHERE tenant_id = $1)
		+ (SELECT count(*) FROM tenant_command_seconds WHERE tenant_id = $1)`, doomed).Scan(&left); err != nil || left != 0 {
		t.Fatalf("%d counter rows left (%v), want none", left, err)
	}
}
