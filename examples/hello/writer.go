package hello

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/examples/hello/internal/hellodb"
)

// writer is the module's reconciler: it writes a greeting's message. Writing twice changes
// nothing, so a key reconciled again after a crash is harmless.
type writer struct {
	pool *pgxpool.Pool
	log  *slog.Logger
}

// Kind is Kind.
func (*writer) Kind() string { return Kind }

// Reconcile writes the greeting of key, a greeting id.
func (w *writer) Reconcile(ctx context.Context, key string) error {
	id, err := uuid.Parse(key)
	if err != nil {
		w.log.Warn("hello: a key that is not a greeting id", "key", key)
		return nil // retrying cannot make it one
	}
	n, err := hellodb.New(w.pool).WriteMessage(ctx, id)
	if err != nil {
		return fmt.Errorf("write greeting %s: %w", id, err)
	}
	if n > 0 {
		w.log.Info("greeting written", "greeting", id)
	}
	return nil
}
