package provision

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/better-compute/better-compute/gen/db"
	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/provision"
)

// tokenGrace is how much longer than the boot timeout a machine's join token stays valid.
const tokenGrace = 5 * time.Minute

// mint (requested → provisioning) mints the machine's single-use join token and its boot ticket
// and records them, sealed, with the step, so that whichever process creates the machine hands
// the provider this token and this boot configuration URL and no other.
func (c *Controller) mint(ctx context.Context, m provisiondb.ProvisionMachine) (outcome, error) {
	k := auth.NewJoinToken()
	expires := time.Now().Add(c.cfg.BootTimeout + tokenGrace)
	_, err := c.move(ctx, m, StateProvisioning, "join token "+k.ID, func(q *provisiondb.Queries, cq *db.Queries) error {
		if _, err := cq.CreateJoinToken(ctx, db.CreateJoinTokenParams{
			ID: k.ID, TenantID: m.TenantID, Description: "machine " + m.Name + " (" + m.ID.String() + ")", Pool: m.Pool,
			Labels:     fleet.EncodeLabels(map[string]string{"machine": m.Name, "machine-class": m.Class}),
			SecretHash: k.Hash(), MaxUses: 1, ExpiresAt: expires,
		}); err != nil {
			return fmt.Errorf("mint the machine's join token: %w", err)
		}
		if err := c.mintTicket(ctx, q, m.ID, expires); err != nil {
			return err
		}
		return q.SetMachineJoinToken(ctx, provisiondb.SetMachineJoinTokenParams{
			ID: m.ID, JoinTokenID: &k.ID, JoinTokenSealed: c.seal.tokens.Seal([]byte(k.String()), []byte(m.ID.String())),
		})
	})
	return next, err
}

// create (provisioning → booting) asks the provider for the machine, with the machine's id as
// the client token: a Create repeated after a crash returns the machine the first one made.
// The provider's id is recorded even when the machine was deleted meanwhile, so destroying
// finds it.
func (c *Controller) create(ctx context.Context, m provisiondb.ProvisionMachine) (outcome, error) {
	p, err := c.provider(ctx, m)
	if err != nil {
		return stop, err
	}
	join, deployment, err := c.join(ctx, m)
	if err != nil {
		return stop, err
	}
	if join, err = c.withBootConfig(ctx, m.ID, join); err != nil {
		return stop, err
	}
	pm, err := p.Create(ctx, provision.CreateRequest{
		ClientToken: m.ID.String(), Name: m.Name, Join: join,
		Tags: map[string]string{provision.TagMachine: m.ID.String(), provision.TagDeployment: deployment},
	})
	if err != nil {
		return stop, fmt.Errorf("create at the provider: %w", err)
	}
	if pm.ProviderID == "" {
		return stop, errors.New("the provider returned a machine without an id")
	}
	if err := provisiondb.New(c.pool).SetMachineProviderID(ctx, provisiondb.SetMachineProviderIDParams{ID: m.ID, ProviderID: pm.ProviderID}); err != nil {
		return stop, fmt.Errorf("record the provider's id: %w", err)
	}
	_, err = c.move(ctx, m, StateBooting, "provider id "+pm.ProviderID, nil)
	return next, err
}

// awaitJoin (booting → joined) links the node that joined with the machine's token; a machine
// whose node has not joined within the boot timeout fails.
func (c *Controller) awaitJoin(ctx context.Context, m provisiondb.ProvisionMachine) (outcome, error) {
	n, ok, err := c.joinedNode(ctx, m)
	if err != nil {
		return stop, err
	}
	if !ok {
		if time.Since(m.StateChangedAt) > c.cfg.BootTimeout {
			_, err := c.move(ctx, m, StateFailed, fmt.Sprintf("its node did not join within %s", c.cfg.BootTimeout), nil)
			return stop, err
		}
		return waitFor(c.cfg.PollInterval), nil
	}
	_, err = c.move(ctx, m, StateJoined, "node "+n.String(), func(q *provisiondb.Queries, _ *db.Queries) error {
		return q.SetMachineNode(ctx, provisiondb.SetMachineNodeParams{ID: m.ID, NodeID: &n})
	})
	return next, err
}

// awaitReady (joined → ready) waits for the machine's node to be ready.
func (c *Controller) awaitReady(ctx context.Context, m provisiondb.ProvisionMachine) (outcome, error) {
	if m.NodeID == nil {
		return stop, provision.Permanent(errors.New("joined without a node"))
	}
	n, err := provisiondb.New(c.pool).GetNodeState(ctx, *m.NodeID)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return stop, provision.Permanent(fmt.Errorf("its node %s was deleted", *m.NodeID))
	case err != nil:
		return stop, fmt.Errorf("read node %s: %w", *m.NodeID, err)
	case n.RevokedAt != nil || n.State == provisiondb.NodeStateRetired:
		return stop, provision.Permanent(fmt.Errorf("its node %s was revoked or retired", n.ID))
	case n.State != provisiondb.NodeStateReady:
		return waitFor(c.cfg.PollInterval), nil
	}
	_, err = c.move(ctx, m, StateReady, "node "+n.ID.String()+" ready", nil)
	return next, err
}
