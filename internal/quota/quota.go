// Package quota holds the per-tenant caps on what a tenant can create: live nodes, usable join
// tokens, pools, principals, working API keys, webhooks, pending leases, and commands a minute. The caps are
// deployment defaults from the configuration (rateLimits.tenant.*), the same for every tenant.
//
// Most caps are checked by counting, inside the transaction that inserts the row: Check takes a
// transaction-scoped advisory lock on (cap, tenant), then counts, so concurrent creates in one
// tenant queue on the lock and the second one counts the first one's row; two of them can never
// both pass.
//
// The caps checked on hot paths read counters instead, which the rows' own inserts keep (by
// triggers, in the inserting transaction), so nothing under a lock grows with what the tenant
// holds:
//   - pending leases (Counted) and live nodes (JoinRefusal): the insert bumps the tenant's
//     counter row and holds it locked until commit, which serialises concurrent creates; the
//     create then reads the counter, its own rows included, and rolls back if over. A join does
//     the read in the database (join_admit, migration 0025), which raises on a refusal so that
//     the join's statements and COMMIT go in one round trip.
//   - commands a minute (CommandReserver, CommandsRefusal): commands/create reserves its commands
//     before its own transaction, in a short one of its own that takes the advisory lock, reads
//     the tenant's per-second reservations of the last minute, and adds or refuses, committing
//     without waiting for the disk: the lock is held for microseconds, never across a create's
//     durable commit. A process keeps one such call in flight per tenant and sends the
//     reservations that arrive meanwhile together in the next, so a tenant's creates do not
//     convoy on the lock. It counts the tenant's calls; commands the workers make (workflows,
//     node control) are bounded by their own caps.
//
// A refusal is ResourceExhausted naming the configuration key of the cap.
package quota

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/apierr"
)

// Limit names one cap; its configuration key is rateLimits.tenant.<name>.
type Limit string

// The caps.
const (
	Nodes             Limit = "nodes"
	JoinTokens        Limit = "joinTokens"
	Pools             Limit = "pools"
	Principals        Limit = "principals"
	APIKeys           Limit = "apiKeys"
	Webhooks          Limit = "webhooks"
	CommandsPerMinute Limit = "commandsPerMinute"
	PendingLeases     Limit = "pendingLeases"
	Workflows         Limit = "workflows"
)

// Key is the cap's configuration key, which refusals name.
func (l Limit) Key() string { return "rateLimits.tenant." + string(l) }

// The default caps, for a zero field of Limits (and the configuration's defaults): no tenant is
// ever uncapped.
const (
	DefaultNodes             = 10_000
	DefaultJoinTokens        = 1_000
	DefaultPools             = 1_000
	DefaultPrincipals        = 1_000
	DefaultAPIKeys           = 1_000
	DefaultWebhooks          = 20
	DefaultCommandsPerMinute = 6_000
	DefaultPendingLeases     = 10_000
	DefaultWorkflows         = 16
)

// Limits are the caps of every tenant. A zero (or negative) field takes its default.
type Limits struct {
	// Nodes caps the tenant's nodes that are neither revoked nor retired (checked at join).
	Nodes int
	// JoinTokens caps the tenant's join tokens that can still be used: not revoked, expired or
	// used up.
	JoinTokens int
	// Pools caps the tenant's pools.
	Pools int
	// Principals caps the tenant's users and service accounts.
	Principals int
	// APIKeys caps the tenant's API keys that have not expired.
	APIKeys int
	// Webhooks caps the tenant's webhooks.
	Webhooks int
	// CommandsPerMinute caps the commands the tenant created in the last minute, counting the
	// ones a create would add (a selector may address many nodes).
	CommandsPerMinute int
	// PendingLeases caps the tenant's leases waiting to be placed, in every pool it leases from
	// (its own and those granted to it).
	PendingLeases int
	// Workflows caps the tenant's running or paused workflows made by workflows/create.
	Workflows int
}

// Of returns the cap named by limit, its default when the field is zero.
func (l Limits) Of(limit Limit) int {
	v, def := 0, 0
	switch limit {
	case Nodes:
		v, def = l.Nodes, DefaultNodes
	case JoinTokens:
		v, def = l.JoinTokens, DefaultJoinTokens
	case Pools:
		v, def = l.Pools, DefaultPools
	case Principals:
		v, def = l.Principals, DefaultPrincipals
	case APIKeys:
		v, def = l.APIKeys, DefaultAPIKeys
	case Webhooks:
		v, def = l.Webhooks, DefaultWebhooks
	case CommandsPerMinute:
		v, def = l.CommandsPerMinute, DefaultCommandsPerMinute
	case PendingLeases:
		v, def = l.PendingLeases, DefaultPendingLeases
	case Workflows:
		v, def = l.Workflows, DefaultWorkflows
	default:
		panic(fmt.Sprintf("quota: unknown cap %q", string(limit)))
	}
	if v <= 0 {
		return def
	}
	return v
}

type limitsKey struct{}

// WithLimits returns ctx carrying the deployment's caps. The API's guard attaches them to every
// call, so handlers check caps without each being configured with them.
func WithLimits(ctx context.Context, l Limits) context.Context {
	return context.WithValue(ctx, limitsKey{}, l)
}

// LimitsFrom returns the caps ctx carries: the defaults when it carries none.
func LimitsFrom(ctx context.Context) Limits {
	l, _ := ctx.Value(limitsKey{}).(Limits)
	return l
}

// Check refuses, with ResourceExhausted, a create in tenant that would take it over the cap
// that ctx carries (see WithLimits) for limit; adding is how many the create makes. q must run
// in the create's transaction, before its insert. Commands a minute are checked by
// AdmitCommands instead.
func Check(ctx context.Context, q *db.Queries, tenant uuid.UUID, limit Limit, adding int) error {
	return CheckMax(ctx, q, tenant, limit, LimitsFrom(ctx).Of(limit), adding)
}

// CheckMax is Check with the cap given: most, or limit's default when most is zero or negative.
func CheckMax(ctx context.Context, q *db.Queries, tenant uuid.UUID, limit Limit, most, adding int) error {
	if most <= 0 {
		most = Limits{}.Of(limit)
	}
	if err := q.LockTenantLimit(ctx, db.LockTenantLimitParams{LimitName: string(limit), TenantID: tenant}); err != nil {
		return fmt.Errorf("lock tenant cap %s: %w", limit, err)
	}
	n, err := count(ctx, q, tenant, limit)
	if err != nil {
		return fmt.Errorf("count for tenant cap %s: %w", limit, err)
	}
	return over(limit, int64(most), n, int64(adding))
}

// Counted refuses, like Check, a create that takes tenant over the cap that ctx carries for
// limit, for a create whose transaction keeps the count itself: total is the tenant's count with
// the create's own adding rows already in it, read from a counter row that the create's insert
// updated and holds locked until it ends (as the lease usage counters of leases/create). That
// lock serialises concurrent creates as Check's advisory lock does, without counting rows; the
// caller rolls back on a refusal.
func Counted(ctx context.Context, limit Limit, total, adding int64) error {
	return over(limit, int64(LimitsFrom(ctx).Of(limit)), total-adding, adding)
}

func over(limit Limit, most, n, adding int64) error {
	if n+adding > most {
		return &apierr.Error{Code: connect.CodeResourceExhausted, Msg: fmt.Sprintf(
			"%s: the tenant has %d %s and may have at most %d; remove some first", limit.Key(), n, noun(limit), most)}
	}
	return nil
}

func count(ctx context.Context, q *db.Queries, tenant uuid.UUID, limit Limit) (int64, error) {
	switch limit {
	case Nodes:
		return q.TenantNodeCount(ctx, tenant)
	case JoinTokens:
		return q.CountTenantJoinTokens(ctx, tenant)
	case Pools:
		return q.CountTenantPools(ctx, tenant)
	case Principals:
		return q.CountTenantPrincipals(ctx, tenant)
	case APIKeys:
		return q.CountTenantAPIKeys(ctx, tenant)
	case Webhooks:
		return q.CountWebhooks(ctx, tenant)
	case PendingLeases:
		return q.CountTenantPendingLeases(ctx, tenant)
	case Workflows:
		return q.CountUnfinishedWorkflows(ctx, tenant)
	}
	return 0, errors.New("unknown cap")
}

func noun(l Limit) string {
	switch l {
	case Nodes:
		return "nodes"
	case JoinTokens:
		return "usable join tokens"
	case Pools:
		return "pools"
	case Principals:
		return "principals"
	case APIKeys:
		return "unexpired API keys"
	case Webhooks:
		return "webhooks"
	case PendingLeases:
		return "pending leases"
	case Workflows:
		return "running or paused workflows"
	}
	return string(l)
}
