package commandsweep_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/workers/internal/commandsweep"
)

// TestSQLTransitionsMatchGo tries every transition statement of queries/commands.sql on a
// command in every state: each changes the command exactly when CanTransition allows it.
func TestSQLTransitionsMatchGo(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	l := acquire(t, f.pool, "singleton:"+commandsweep.SweeperName, time.Minute)
	sweep := func(overdue bool) func(c db.Command) (bool, error) {
		return func(c db.Command) (bool, error) {
			if overdue {
				f.exec(`UPDATE commands SET deadline = now() - interval '1 second' WHERE id = $1`, c.ID)
			}
			n, err := commandsweep.Sweep(ctx, f.pool, l, commandsweep.SweeperOptions{AckTimeout: time.Minute})
			return n.Expired+n.Requeued == 1, err
		}
	}
	one := func(_ db.Command, err error) (bool, error) {
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	}
	statements := []struct {
		name string
		to   command.State
		run  func(c db.Command) (bool, error)
	}{
		{"MarkCommandsSent", command.Sent, func(c db.Command) (bool, error) {
			rows, err := f.q.MarkCommandsSent(ctx, db.MarkCommandsSentParams{NodeID: c.NodeID, Ids: []uuid.UUID{c.ID}})
			return len(rows) == 1, err
		}},
		{"AckCommand", command.Acked, func(c db.Command) (bool, error) {
			return one(f.q.AckCommand(ctx, db.AckCommandParams{NodeID: c.NodeID, ID: c.ID}))
		}},
		{"FinishCommand succeeded", command.Succeeded, func(c db.Command) (bool, error) {
			_, err := f.q.FinishCommand(ctx, db.FinishCommandParams{NodeID: c.NodeID, ID: c.ID, State: "succeeded", Result: []byte(`{"ok":true}`)})
			return one(db.Command{}, err)
		}},
		{"FinishCommand failed", command.Failed, func(c db.Command) (bool, error) {
			_, err := f.q.FinishCommand(ctx, db.FinishCommandParams{NodeID: c.NodeID, ID: c.ID, State: "failed", Error: "boom"})
			return one(db.Command{}, err)
		}},
		{"CancelCommand", command.Cancelled, func(c db.Command) (bool, error) {
			return one(f.q.CancelCommand(ctx, db.CancelCommandParams{TenantID: c.TenantID, ID: c.ID}))
		}},
		{"ExpireOverdueCommands", command.Expired, sweep(true)},
		{"RequeueUnackedCommands", command.Pending, sweep(false)},
	}
	for _, from := range command.States {
		for _, st := range statements {
			c := f.create(time.Hour)
			// Put the command in state from, sent (if ever) an hour ago, so the ack timeout
			// has passed.
			f.exec(`UPDATE commands SET state = $2, sent_at = now() - interval '1 hour',
				finished_at = CASE WHEN $3 THEN now() END WHERE id = $1`, c.ID, string(from), command.Final(from))
			changed, err := st.run(c)
			if err != nil {
				t.Fatalf("%s from %s: %v", st.name, from, err)
			}
			if want := command.CanTransition(from, st.to); changed != want {
				t.Errorf("%s from %s: changed %v, but CanTransition(%s, %s) = %v", st.name, from, changed, from, st.to, want)
			}
			got := f.get(c.ID).State
			if changed && got != st.to || !changed && got != from {
				t.Errorf("%s from %s: state is now %s", st.name, from, got)
			}
			// Leave no command behind for the next sweep.
			f.exec(`DELETE FROM commands WHERE id = $1`, c.ID)
		}
	}
}

// TestCreateIsIdempotent creates commands with the same idempotency key: for the same node
// every create returns the first command, concurrent ones included.
func TestCreateIsIdempotent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	create := func(key string, typ string) db.Command {
		c, err := f.q.CreateCommand(ctx, db.CreateCommandParams{
			ID: uuid.Must(uuid.NewV7()), TenantID: f.tenant, NodeID: f.node, Type: typ,
			Payload: []byte(`{}`), IdempotencyKey: key, Deadline: time.Now().Add(time.Hour),
		})
		if err != nil {
			t.Error(err)
		}
		return c
	}
	first := create("k", "first")
	results := make(chan db.Command, 8)
	var wg sync.WaitGroup
	for range cap(results) {
		wg.Go(func() { results <- create("k", "again") })
	}
	wg.Wait()
	close(results)
	for c := range results {
		if c.ID != first.ID || c.Type != "first" {
			t.Errorf("create with a used key returned %s (%s), want the first command %s", c.ID, c.Type, first.ID)
		}
	}
	if other := create("other", "x"); other.ID == first.ID {
		t.Error("a new key returned the first command")
	}
	var n int
	if err := f.pool.QueryRow(ctx, `SELECT count(*) FROM commands`).Scan(&n); err != nil || n != 2 {
		t.Errorf("%d commands (%v), want 2", n, err)
	}
}
