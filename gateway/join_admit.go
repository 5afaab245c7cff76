package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/quota"
)

// admitJoin creates the node of a join with its event, spends a use of the token and checks
// the tenant's cap of nodes, in one transaction sent to the database in one round trip: BEGIN,
// the event, the node (whose insert bumps and locks the tenant's node counter), AdmitJoin (which
// spends the use, locking the token's row, and reads the counter) and COMMIT. The locks that
// serialise the joins of a tenant and of a token are taken last, so joins queue for the end of
// each other's transaction only. AdmitJoin raises on a refusal, which aborts the transaction
// before COMMIT: a refused join changes nothing.
func (g *Gateway) admitJoin(ctx context.Context, t db.JoinToken, nodeID uuid.UUID, hostname string, notAfter time.Time) error {
	most := quota.Limits{Nodes: g.opts.TenantNodes}.Of(quota.Nodes)
	tx, err := database.BeginPipe(ctx, g.opts.Pool)
	if err != nil {
		return fmt.Errorf("join: %w", err)
	}
	defer tx.End(ctx)
	deferred := db.New(tx.Deferred())
	if err := event.Emit(ctx, deferred, t.TenantID, event.NodeJoined{ID: nodeID, Hostname: hostname}); err != nil {
		return err
	}
	if err := deferred.InsertJoinedNode(ctx, db.InsertJoinedNodeParams{
		ID: nodeID, TenantID: t.TenantID, Hostname: hostname, Pool: t.Pool, Labels: t.Labels,
		JoinTokenID: &t.ID, CertNotAfter: &notAfter,
	}); err != nil {
		return fmt.Errorf("create node: %w", err)
	}
	tx.CommitNext()
	err = db.New(tx).AdmitJoin(ctx, db.AdmitJoinParams{TokenID: t.ID, TenantID: t.TenantID, MaxNodes: int64(most)})
	if refusal, ok := quota.JoinRefusal(err, most); ok {
		return refusal
	}
	var pg *pgconn.PgError
	switch {
	case errors.As(err, &pg) && pg.ConstraintName == "join_token_usable":
		return apierr.Unauthenticated("join token %s has been used up, revoked or expired", t.ID)
	case err != nil:
		return fmt.Errorf("create node %s and spend join token %s: %w", nodeID, t.ID, err)
	}
	return nil
}
