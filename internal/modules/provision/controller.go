package provision

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/enqueue"
	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/internal/provision"
	"github.com/better-compute/better-compute/internal/reconcile"
)

// Kind is the lifecycle controller's reconcile kind; its keys are machine ids.
const Kind = "provision.machine"

// ControllerOptions configure the lifecycle controller.
type ControllerOptions struct {
	Pool   *pgxpool.Pool
	Logger *slog.Logger
	// Secret is the deployment secret: it opens classes' credentials and machines' join tokens,
	// and loads the machine PKI whose root CA machines pin.
	Secret string
	Config Config
	// Providers are the enabled factories by kind.
	Providers Providers
	// GatewayEndpoint is the deployment's gateway.publicEndpoint, used when the module's
	// configuration names no gatewayEndpoint.
	GatewayEndpoint string
	// APIURL is the API's public URL with its base path (config baseURL and basePath), at which
	// machines fetch their boot configuration; empty when baseURL is not set, and then providers
	// get no boot configuration URL.
	APIURL string
}

// Controller moves machines through their lifecycle, one step at a time, each recorded before
// the provider is acted on where a crash between the two would otherwise lose or repeat work.
type Controller struct {
	pool    *pgxpool.Pool
	log     *slog.Logger
	cfg     Config
	open    opener
	seal    sealers
	secret  string
	gateway string
	apiURL  string
}

// NewController returns the controller; it fails when no gateway endpoint is configured, as
// machines could not be told where to join.
func NewController(opts ControllerOptions) (*Controller, error) {
	s, err := sealersFor(opts.Secret)
	if err != nil {
		return nil, err
	}
	gw := opts.Config.GatewayEndpoint
	if gw == "" {
		gw = opts.GatewayEndpoint
	}
	if gw == "" {
		return nil, errors.New("provision module: no gateway endpoint for machines to join at: set gateway.publicEndpoint or the module's gatewayEndpoint")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Controller{
		pool: opts.Pool, log: log, cfg: opts.Config, open: opener{providers: opts.Providers, seal: s, egress: egressOf(opts.Config)},
		seal: s, secret: opts.Secret, gateway: gw, apiURL: opts.APIURL,
	}, nil
}

// Registration runs the controller in the controllers role, resyncing every machine that is
// not gone or failed.
func (c *Controller) Registration() reconcile.Registration {
	return reconcile.Registration{
		Reconciler: c, Role: reconcile.RoleControllers, Timeout: time.Minute,
		Resync: func(ctx context.Context) ([]string, error) {
			ids, err := provisiondb.New(c.pool).ListLiveMachineIDs(ctx)
			if err != nil {
				return nil, err
			}
			return enqueue.Keys(ids), nil
		},
	}
}

// Kind is Kind.
func (c *Controller) Kind() string { return Kind }

// outcome is what a step leaves: go on to the next step now, look again after a while, or stop.
type outcome struct {
	again bool
	wait  time.Duration
}

var (
	next = outcome{again: true}
	stop = outcome{}
)

func waitFor(d time.Duration) outcome { return outcome{wait: d} }

// maxSteps bounds the steps one Reconcile takes, so a machine cannot hold a worker forever.
const maxSteps = 12

// Reconcile moves the machine as far as it can go now. A provider's error is recorded as the
// machine's reason and retried with backoff; a permanent one fails the machine.
func (c *Controller) Reconcile(ctx context.Context, key string) error {
	id, err := uuid.Parse(key)
	if err != nil {
		return nil // not a machine
	}
	q := provisiondb.New(c.pool)
	for range maxSteps {
		m, err := q.GetMachineByID(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read machine %s: %w", id, err)
		}
		out, err := c.step(ctx, m)
		switch {
		case err != nil && provision.IsPermanent(err):
			c.log.Warn("machine failed", "machine", id, "state", m.State, "err", err)
			if _, ferr := c.move(ctx, m, StateFailed, err.Error(), nil); ferr != nil {
				return ferr
			}
			return nil
		case err != nil:
			if rerr := q.SetMachineReason(ctx, provisiondb.SetMachineReasonParams{ID: id, Reason: err.Error()}); rerr != nil {
				c.log.Warn("record machine's error", "machine", id, "err", rerr)
			}
			return fmt.Errorf("machine %s (%s): %w", id, m.State, err)
		case out.wait > 0:
			return lookAgain(ctx, c.pool, key, out.wait)
		case !out.again:
			return nil
		}
	}
	return lookAgain(ctx, c.pool, key, 0)
}

// step takes the machine one step from where it is.
func (c *Controller) step(ctx context.Context, m provisiondb.ProvisionMachine) (outcome, error) {
	switch m.State {
	case StateRequested:
		return c.mint(ctx, m)
	case StateProvisioning:
		return c.create(ctx, m)
	case StateBooting:
		return c.awaitJoin(ctx, m)
	case StateJoined:
		return c.awaitReady(ctx, m)
	case StateDeleting:
		return c.startDrain(ctx, m)
	case StateDraining:
		return c.awaitDrained(ctx, m)
	case StateDestroying:
		return c.destroy(ctx, m)
	}
	return stop, nil // ready, gone, failed: nothing to do until asked
}

// errMoved is move's answer when the machine left the state the step started from (deleted
// meanwhile): the step is taken again from the new state.
var errMoved = errors.New("the machine moved on meanwhile")

// move takes the machine from the state it was read in to state, recording the step with
// detail, after fn ran in the same transaction (on the module's and the core's queries).
func (c *Controller) move(ctx context.Context, m provisiondb.ProvisionMachine, state, detail string, fn func(q *provisiondb.Queries, cq *db.Queries) error) (provisiondb.ProvisionMachine, error) {
	var out provisiondb.ProvisionMachine
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		q, cq := provisiondb.New(tx), db.New(tx)
		cur, err := q.LockMachine(ctx, m.ID)
		if err != nil {
			return fmt.Errorf("lock machine %s: %w", m.ID, err)
		}
		if cur.State != m.State {
			return errMoved
		}
		if fn != nil {
			if err := fn(q, cq); err != nil {
				return err
			}
		}
		reason := ""
		if state == StateFailed {
			reason = detail
		}
		if out, err = q.SetMachineState(ctx, provisiondb.SetMachineStateParams{ID: m.ID, State: state, FromState: m.State, Reason: reason}); err != nil {
			return fmt.Errorf("move machine %s to %s: %w", m.ID, state, err)
		}
		return q.AddMachineStep(ctx, provisiondb.AddMachineStepParams{MachineID: m.ID, State: state, Detail: detail})
	})
	if errors.Is(err, errMoved) {
		return out, nil
	}
	return out, err
}

// lookAgain makes the machine due again after d.
func lookAgain(ctx context.Context, pool *pgxpool.Pool, key string, d time.Duration) error {
	if err := db.New(pool).DeferReconcile(ctx, db.DeferReconcileParams{Kind: Kind, Key: key, DelayMs: d.Milliseconds()}); err != nil {
		return fmt.Errorf("look at machine %s again later: %w", key, err)
	}
	return nil
}

// provider opens the machine's class's provider.
func (c *Controller) provider(ctx context.Context, m provisiondb.ProvisionMachine) (provision.Provider, error) {
	cl, err := provisiondb.New(c.pool).GetClass(ctx, provisiondb.GetClassParams{TenantID: m.TenantID, Name: m.Class})
	if err != nil {
		return nil, fmt.Errorf("read class %s: %w", m.Class, err)
	}
	return c.open.open(cl)
}

// join is what the machine's daemon needs to join: its token, opened, the gateway and the
// deployment's root CA; and the deployment's name for the provider's tags.
func (c *Controller) join(ctx context.Context, m provisiondb.ProvisionMachine) (provision.Join, string, error) {
	if m.JoinTokenSealed == nil {
		return provision.Join{}, "", provision.Permanent(errors.New("the machine's join token is not recorded"))
	}
	token, err := c.seal.tokens.Open(m.JoinTokenSealed, []byte(m.ID.String()))
	if err != nil {
		return provision.Join{}, "", provision.Permanent(fmt.Errorf("open the machine's join token: %w", err))
	}
	b, err := pki.Load(ctx, c.pool, c.secret)
	if err != nil {
		return provision.Join{}, "", fmt.Errorf("load the machine PKI: %w", err)
	}
	return provision.Join{Token: string(token), Gateway: c.gateway, RootCA: b.RootPEM()}, b.TrustDomain(), nil
}
