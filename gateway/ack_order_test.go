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

// TestAcksAreNotWaitedForOnDisk: the ack statement turns synchronous_commit off for its own
// transaction (an ack lost with a crash costs a redelivery), and still acks.
func TestAcksAreNotWaitedForOnDisk(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _, sess := newRecorder(t)
	id := uuid.New()
	sentCommands(t, pool, sess, []uuid.UUID{id})
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// The tests' cluster runs with synchronous_commit off: turn it on, so the statement must
	// be what turns it off.
	if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = on`); err != nil {
		t.Fatal(err)
	}
	if err := db.New(tx).AckCommands(ctx, db.AckCommandsParams{NodeIds: []uuid.UUID{sess.node}, Ids: []uuid.UUID{id}}); err != nil {
		t.Fatal(err)
	}
	var setting, state string
	if err := tx.QueryRow(ctx, `SELECT current_setting('synchronous_commit'), (SELECT state::text FROM commands WHERE id = $1)`, id).Scan(&setting, &state); err != nil {
		t.Fatal(err)
	}
	if setting != "off" || state != "acked" {
		t.Errorf("after the ack: synchronous_commit %s, the command %s; want off and acked", setting, state)
	}
}
