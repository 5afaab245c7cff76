package command

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/event"
)

// Create creates a command of typ for a node of tenant, with an idempotency key, in q's
// transaction, or returns the one that key already created (isNew false). A new command gets
// its command.created event, as commands/create gives. The background workers that send
// commands (node life cycle, NodeSpec, workflows) all create them here; the caller tells the
// gateway after commit.
func Create(ctx context.Context, q *db.Queries, tenant, node uuid.UUID, typ, key string, payload []byte, timeout time.Duration) (c db.Command, isNew bool, err error) {
	id := uuid.Must(uuid.NewV7())
	c, err = q.CreateCommand(ctx, db.CreateCommandParams{
		ID: id, TenantID: tenant, NodeID: node, Type: typ, Payload: payload,
		IdempotencyKey: key, Deadline: time.Now().Add(timeout),
	})
	if err != nil {
		return db.Command{}, false, fmt.Errorf("create %s command for node %s: %w", typ, node, err)
	}
	if c.ID != id {
		return c, false, nil
	}
	err = event.Emit(ctx, q, tenant, event.CommandCreated{CommandRef: event.CommandRef{ID: c.ID, NodeID: node, Type: string(c.Type)}})
	return c, true, err
}
