package remediation

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
)

// ReturnReplaced ends the node's remediations in service whose GPU was replaced (it is gone, and
// a GPU of another serial is at its index): they become returned, with the serials in their
// history, and the node is made ready again (ReturnNode). The GPU health reconciler calls it when
// the node's GPUs change. It reports whether the node moved, for the caller to wake
// fleet.KindLifecycle after the commit.
func ReturnReplaced(ctx context.Context, q *db.Queries, node uuid.UUID, now time.Time) (bool, error) {
	rows, err := q.ReplacedInService(ctx, node)
	if err != nil {
		return false, fmt.Errorf("find replaced GPUs in service on node %s: %w", node, err)
	}
	moved := false
	for _, r := range rows {
		var h []Entry
		if err := json.Unmarshal(r.History, &h); err != nil {
			return false, fmt.Errorf("remediation %s: history: %w", r.ID, err)
		}
		at := now.UTC().Format(time.RFC3339Nano)
		h = append(h, Entry{
			Step: len(h), Action: ActionService, Outcome: StateReturned, StartedAt: at, EndedAt: at,
			Detail: fmt.Sprintf("GPU serial %s replaced by %s", r.GpuSerial, r.NewSerial),
		})
		b, err := json.Marshal(h)
		if err != nil {
			return false, fmt.Errorf("encode the history: %w", err)
		}
		if _, err := q.EndRemediationOfTenant(ctx, db.EndRemediationOfTenantParams{TenantID: r.TenantID, ID: r.ID, State: StateReturned, History: b}); err != nil {
			return false, fmt.Errorf("return remediation %s: %w", r.ID, err)
		}
		m, err := ReturnNode(ctx, q, r.TenantID, node)
		if err != nil {
			return false, err
		}
		moved = moved || m
	}
	return moved, nil
}
