package nodes

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/server/internal/gpus"
)

// deviceHealth is one GPU's health as NodesGPUHealth aggregates it.
type deviceHealth struct {
	UUID    string          `json:"uuid"`
	Index   int32           `json:"idx"`
	Present bool            `json:"present"`
	Health  string          `json:"health"`
	Reasons json.RawMessage `json:"reasons"`
}

// addGPUHealth sets the GPU health of the tenant's nodes (unhealthy_gpus, gpu_quarantined) and,
// for those with an inventory, each inventory GPU's health and reasons, from the devices the
// control plane keeps (gpus.proto): one statement for all of them. An inventory GPU is matched
// by UUID, or by index when reported without one; a GPU with no device row keeps its health
// unset.
func addGPUHealth(ctx context.Context, q *db.Queries, tenant uuid.UUID, nodes []*nodesv1.Node) error {
	if len(nodes) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, 0, len(nodes))
	withGPUs := false
	for _, n := range nodes {
		id, err := uuid.Parse(n.GetId())
		if err != nil {
			return fmt.Errorf("node id %q: %w", n.GetId(), err)
		}
		ids = append(ids, id)
		withGPUs = withGPUs || len(n.GetInventory().GetGpus()) > 0
	}
	rows, err := q.NodesGPUHealth(ctx, db.NodesGPUHealthParams{TenantID: tenant, Ids: ids, WithGpus: withGPUs})
	if err != nil {
		return fmt.Errorf("GPU health of nodes: %w", err)
	}
	byNode := make(map[string]db.NodesGPUHealthRow, len(rows))
	for _, r := range rows {
		byNode[r.NodeID.String()] = r
	}
	for _, n := range nodes {
		r, ok := byNode[n.GetId()]
		if !ok {
			continue
		}
		n.UnhealthyGpus, n.GpuQuarantined = r.UnhealthyGpus, r.Quarantined
		if len(n.GetInventory().GetGpus()) == 0 {
			continue
		}
		var devices []deviceHealth
		if err := json.Unmarshal(r.Gpus, &devices); err != nil {
			return fmt.Errorf("node %s: decode GPU health: %w", n.GetId(), err)
		}
		for _, g := range n.GetInventory().GetGpus() {
			// Devices come present first, so a GPU that moved within the node matches its
			// present row.
			for _, d := range devices {
				if d.UUID != g.GetUuid() || (d.UUID == "" && d.Index != g.GetIndex()) {
					continue
				}
				g.Health = gpus.HealthState(d.Health)
				if g.HealthReasons, err = gpus.Reasons(d.Reasons); err != nil {
					return fmt.Errorf("node %s: %w", n.GetId(), err)
				}
				break
			}
		}
	}
	return nil
}
