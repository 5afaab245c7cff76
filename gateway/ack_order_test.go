package gateway

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
)

// TestAcksAndResultsNeverDeadlock: a batch of acks and a batch of results for the same commands,
// written at once in opposite orders, both succeed. Each statement locks its commands in id
// order, whatever order the sessions received them in; before, they locked in arrival order and
// a fast command's ack and result, in two batches, deadlocked (a second of deadlock_timeout and
// a refused batch each time).
func TestAcksAndResultsNeverDeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, g, sess := newRecorder(t)
	const n = 400
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.New()
	}
	sentCommands(t, pool, sess, ids)
	nodes := slices.Repeat([]uuid.UUID{sess.node}, n)
	reversed := slices.Clone(ids)
	slices.Reverse(reversed)
	for round := range 10 {
		if _, err := pool.Exec(ctx, `UPDATE commands SET state = 'sent', result = NULL, finished_at = NULL, acked_at = NULL`); err != nil {
			t.Fatal(err)
		}
		batch := make([]pendingResult, n)
		for i, id := range reversed {
			batch[i] = pendingResult{sess: sess, id: id, success: true}
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		var ackErr, resultErr error
		wg.Go(func() {
			<-start
			ackErr = db.New(pool).AckCommands(ctx, db.AckCommandsParams{NodeIds: nodes, Ids: ids})
		})
		wg.Go(func() {
			<-start
			resultErr = g.recordResults(ctx, batch)
		})
		close(start)
		wg.Wait()
		if ackErr != nil || resultErr != nil {
			t.Fatalf("round %d: acks: %v; results: %v", round, ackErr, resultErr)
		}
		var finished int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM commands WHERE state = 'succeeded'`).Scan(&finished); err != nil {
			t.Fatal(err)
		}
		if finished != n {
			t.Fatalf("round %d: %d of %d commands succeeded", round, finished, n)
		}
	}
}
