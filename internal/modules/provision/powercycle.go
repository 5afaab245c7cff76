package provision

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/gen/db"
	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/provision"
	"github.com/better-compute/better-compute/internal/reconcile"
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

// ReplaceNode replaces the machine whose daemon joined as node with a new one of the same class
// (and pool, for a scaled pool's machine): the new machine is requested and the old one moved to
// deleting, in one transaction, so the provider's resources of the old one are released as any
// deletion's are. It reports false when no machine of this module is behind the node, or when
// the provider does not hold it now. The remediation controller's replace step calls it.
func (c *Controller) ReplaceNode(ctx context.Context, node uuid.UUID) (bool, error) {
	done := false
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		q := provisiondb.New(tx)
		found, err := q.MachineOfNode(ctx, &node)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("find the machine of node %s: %w", node, err)
		}
		m, err := q.LockMachine(ctx, found.ID)
		if err != nil {
			return fmt.Errorf("lock machine %s: %w", found.ID, err)
		}
		if !slices.Contains(atProvider, m.State) || m.ProviderID == "" {
			return nil
		}
		id := uuid.Must(uuid.NewV7())
		next, err := q.CreatePoolMachine(ctx, provisiondb.CreatePoolMachineParams{
			ID: id, TenantID: m.TenantID, Class: m.Class, Name: replacementName(m.Name, id), PoolID: m.PoolID, Pool: m.Pool,
		})
		if err != nil {
			return fmt.Errorf("request the replacement of machine %s: %w", m.ID, err)
		}
		if err := q.AddMachineStep(ctx, provisiondb.AddMachineStepParams{
			MachineID: id, State: StateRequested, Detail: "class " + m.Class + ", replacing " + m.Name + " for a remediation",
		}); err != nil {
			return err
		}
		if _, err := q.SetMachineState(ctx, provisiondb.SetMachineStateParams{ID: m.ID, State: StateDeleting, FromState: m.State, Reason: m.Reason}); err != nil {
			return fmt.Errorf("move machine %s to deleting: %w", m.ID, err)
		}
		if err := q.AddMachineStep(ctx, provisiondb.AddMachineStepParams{MachineID: m.ID, State: StateDeleting, Detail: "replaced by " + next.Name + " for a remediation"}); err != nil {
			return err
		}
		cq := db.New(tx)
		for _, key := range []string{id.String(), m.ID.String()} {
			if err := reconcile.Enqueue(ctx, cq, Kind, key); err != nil {
				return err
			}
		}
		done = true
		return nil
	})
	return done, err
}

// replacementName names the machine that replaces one: its name with a suffix of the new id,
// within the 63 characters a machine name may have.
func replacementName(old string, id uuid.UUID) string {
	s := id.String()
	suffix := "-r" + s[len(s)-6:]
	if len(old)+len(suffix) > 63 {
		old = strings.TrimRight(old[:63-len(suffix)], "-")
	}
	return old + suffix
}
