package provision

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/provision"
)

// PowerCycleNode resets the machine whose daemon joined as node through its provider, and
// records the step on the machine: the remediation controller's powerCycle for a node that no
// longer answers. It reports false when no machine of this module is behind the node, or when
// the provider does not hold it now (only booting, joined and ready machines can be powered).
func (c *Controller) PowerCycleNode(ctx context.Context, node uuid.UUID) (bool, error) {
	q := provisiondb.New(c.pool)
	m, err := q.MachineOfNode(ctx, &node)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("find the machine of node %s: %w", node, err)
	}
	if !slices.Contains(atProvider, m.State) || m.ProviderID == "" {
		return false, nil
	}
	prov, err := c.provider(ctx, m)
	if err != nil {
		return false, err
	}
	if err := prov.Power(ctx, m.ProviderID, provision.PowerReset); err != nil {
		return false, fmt.Errorf("machine %s: the provider did not reset it: %w", m.ID, err)
	}
	if err := q.AddMachineStep(ctx, provisiondb.AddMachineStepParams{MachineID: m.ID, State: m.State, Detail: "power cycled by a remediation"}); err != nil {
		return true, fmt.Errorf("record the power cycle of machine %s: %w", m.ID, err)
	}
	return true, nil
}
