package commands_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/guard"
	"github.com/better-compute/better-compute/internal/quota"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

// BenchmarkCreate measures commands/create of one command each at a tenant that created 30,000
// commands in the last minute (500 a second) under a commandsPerMinute cap they leave room in:
// every create checks the cap. closed keeps 32 creates in flight (creates/s is the figure);
// paced starts 500 a second whatever the answers (the p99 latency, from each create's scheduled
// start, is the figure).
func BenchmarkCreate(b *testing.B) {
	b.Run("closed/inflight=32", func(b *testing.B) {
		create, ids := createEnv(b)
		took := make([]time.Duration, b.N)
		var next atomic.Int64
		var wg sync.WaitGroup
		b.ResetTimer()
		start := time.Now()
		for range 32 {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < int64(b.N); i = next.Add(1) - 1 {
					t0 := time.Now()
					err := create(ids[i%int64(len(ids))], i)
					took[i] = time.Since(t0)
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		report(b, time.Since(start), took)
	})
	b.Run("paced/rate=500", func(b *testing.B) {
		const every = 2 * time.Millisecond
		create, ids := createEnv(b)
		took := make([]time.Duration, b.N)
		var wg sync.WaitGroup
		b.ResetTimer()
		start := time.Now()
		for i := range int64(b.N) {
			due := start.Add(time.Duration(i) * every)
			time.Sleep(time.Until(due))
			wg.Go(func() {
				err := create(ids[i%int64(len(ids))], i)
				took[i] = time.Since(due)
				if err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
		report(b, time.Since(start), took)
	})
}

func report(b *testing.B, elapsed time.Duration, took []time.Duration) {
	b.Helper()
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(len(took))/elapsed.Seconds(), "creates/s")
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
}

// createEnv starts the API at a tenant with 100 nodes and 30,000 commands of the last minute,
// and returns a create of command i for a node, and the nodes.
func createEnv(b *testing.B) (create func(node uuid.UUID, i int64) error, nodeIDs []uuid.UUID) {
	b.Helper()
	const nodes, recent = 100, 30_000
	env := servertest.Start(b, dbtest.Pool(b), func(o *server.Options) {
		o.RateLimits = guard.RateLimits{Tenant: quota.Limits{CommandsPerMinute: 1 << 30}}
	})
	ctx := context.Background()
	me, err := env.IAM(env.AdminKey).WhoAmI(ctx, &iamv1.WhoAmIRequest{})
	if err != nil {
		b.Fatal(err)
	}
	tenant := uuid.MustParse(me.GetTenant().GetId())
	ids := make([]uuid.UUID, nodes)
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7())
	}
	if _, err := env.Pool.Exec(ctx, `INSERT INTO nodes (id, tenant_id) SELECT unnest($1::uuid[]), $2`, ids, tenant); err != nil {
		b.Fatal(err)
	}
	cmds := make([]uuid.UUID, recent)
	for i := range cmds {
		cmds[i] = uuid.Must(uuid.NewV7())
	}
	if _, err := env.Pool.Exec(ctx, `
		INSERT INTO commands (id, tenant_id, node_id, type, idempotency_key, deadline)
		SELECT c, $2, ($3::uuid[])[1 + i % $4], 'echo', c::text, now() + interval '1 hour'
		FROM unnest($1::uuid[]) WITH ORDINALITY AS u (c, i)`, cmds, tenant, ids, nodes); err != nil {
		b.Fatal(err)
	}
	if _, err := env.Pool.Exec(ctx, "VACUUM ANALYZE commands"); err != nil {
		b.Fatal(err)
	}
	c := client(env, env.AdminKey)
	return func(node uuid.UUID, i int64) error {
		_, err := c.Create(ctx, &commandsv1.CreateRequest{
			NodeId: node.String(), Payload: &commandsv1.CreateRequest_Echo{Echo: echo}, IdempotencyKey: fmt.Sprint("bench-", i),
		})
		return err
	}, ids
}
