// Package enqueue queues rows for the reconcilers, keyed by their ids: the one way the domain
// packages (fleet, capacity) and the workers' resyncs turn ids into reconcile keys.
package enqueue

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
)

// Keys are the reconcile keys of ids, their canonical strings.
func Keys(ids []uuid.UUID) []string {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = id.String()
	}
	return keys
}

// IDs queues ids for the reconciler kind with q, which callers bind to the transaction of the
// change so the keys are queued exactly when it commits.
func IDs(ctx context.Context, q *db.Queries, kind string, ids ...uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	if err := q.EnqueueReconcile(ctx, db.EnqueueReconcileParams{Kind: kind, Keys: Keys(ids)}); err != nil {
		return fmt.Errorf("enqueue %s: %w", kind, err)
	}
	return nil
}
