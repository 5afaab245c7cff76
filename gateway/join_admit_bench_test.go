package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/event"
)

// BenchmarkJoinTransaction measures the database side of joins alone (no TLS, keys or
// certificates), 32 in flight from one multi-use token, at a tenant with 10,000 nodes whose rows
// heartbeats rewrote five times over (issue 18): admitJoin, and for comparison the transaction
// joins ran before the node counters (advisory lock, count(*) of the tenant's nodes, then the
// node, its event and the token's spend, a round trip each).
func BenchmarkJoinTransaction(b *testing.B) {
	b.Run("counters", func(b *testing.B) {
		g, tok := joinBenchEnv(b)
		runJoins(b, func(id uuid.UUID) error {
			return g.admitJoin(context.Background(), tok, id, "bench", time.Now().Add(time.Hour))
		})
	})
	b.Run("count-under-lock", func(b *testing.B) {
		g, tok := joinBenchEnv(b)
		runJoins(b, func(id uuid.UUID) error { return countingJoin(g.opts.Pool, tok, id) })
	})
}

// countingJoin is the join transaction as it was before the node counters.
func countingJoin(pool *pgxpool.Pool, t db.JoinToken, id uuid.UUID) error {
	ctx := context.Background()
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		q := db.New(tx)
		if err := q.LockTenantLimit(ctx, db.LockTenantLimitParams{LimitName: "nodes", TenantID: t.TenantID}); err != nil {
			return err
		}
		var n int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM nodes WHERE tenant_id = $1 AND revoked_at IS NULL AND state <> 'retired'`, t.TenantID).Scan(&n); err != nil {
			return err
		}
		if n >= 100_000 {
			return errors.New("over the cap")
		}
		notAfter := time.Now().Add(time.Hour)
		if _, err := q.CreateNode(ctx, db.CreateNodeParams{
			ID: id, TenantID: t.TenantID, Hostname: "bench", Pool: t.Pool, Labels: t.Labels, JoinTokenID: &t.ID, CertNotAfter: &notAfter,
		}); err != nil {
			return err
		}
		if err := event.Emit(ctx, q, t.TenantID, event.NodeJoined{ID: id, Hostname: "bench"}); err != nil {
			return err
		}
		_, err := q.SpendJoinToken(ctx, t.ID)
		return err
	})
}

// joinBenchEnv makes a gateway (for its options only) on a database whose root tenant has
// 10,000 heartbeat-bloated nodes, and a join token with uses for the benchmark.
func joinBenchEnv(b *testing.B) (*Gateway, db.JoinToken) {
	b.Helper()
	ctx := context.Background()
	pool := dbtest.Pool(b)
	root, err := auth.EnsureRootTenant(ctx, pool)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO nodes (id, tenant_id, state)
		SELECT gen_random_uuid(), $1, 'ready' FROM generate_series(1, 10000)`, root.ID); err != nil {
		b.Fatal(err)
	}
	for range 5 {
		if _, err := pool.Exec(ctx, "INSERT INTO node_liveness (node_id, last_seen_at) SELECT id, now() FROM nodes ON CONFLICT (node_id) DO UPDATE SET last_seen_at = now()"); err != nil {
			b.Fatal(err)
		}
	}
	k := auth.NewJoinToken()
	tok, err := db.New(pool).CreateJoinToken(ctx, db.CreateJoinTokenParams{
		ID: k.ID, TenantID: root.ID, Labels: []byte(`{}`), SecretHash: k.Hash(), MaxUses: int32(min(b.N+64, 1<<30)), ExpiresAt: time.Now().Add(time.Hour),
	})
	if err != nil {
		b.Fatal(err)
	}
	return &Gateway{opts: Options{Pool: pool, TenantNodes: 100_000}}, tok
}

func runJoins(b *testing.B, join func(uuid.UUID) error) {
	b.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range 32 {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				if err := join(uuid.Must(uuid.NewV7())); err != nil {
					b.Error(fmt.Errorf("join: %w", err))
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "joins/s")
}
