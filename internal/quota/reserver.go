package quota

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
)

// MaxReserveBatch bounds the reservations one database call of a CommandReserver decides; the
// rest wait for the next call.
const MaxReserveBatch = 1000

// reserveTimeout bounds a reservation call, which runs for every caller of its batch and so on
// none of their contexts.
const reserveTimeout = 30 * time.Second

// CommandReserver reserves commands against the commandsPerMinute cap for one process, keeping
// at most one database call in flight per tenant: the reservations that arrive while one is in
// flight wait and go together in the next (ReserveCommands, commands_reserve_all of migration
// 0044), which decides each in arrival order exactly as if each had its own call. A tenant's
// creates therefore do not convoy on the cap's lock, one transaction each: the lock is taken
// about once a round trip per process, whatever the rate. It stays exact under concurrency
// across processes too, because the database takes the tenant's lock for each call. Safe for
// concurrent use; the zero value is not usable, call NewCommandReserver.
type CommandReserver struct {
	q       *db.Queries
	mu      sync.Mutex
	tenants map[uuid.UUID]*reserveQueue // a tenant with a call in flight; absent when none
}

// reserveQueue holds a tenant's reservations waiting for the next call.
type reserveQueue struct{ waiting []*reserveAsk }

// reserveAsk is one caller's reservation: n commands under its cap most, answered once on done.
type reserveAsk struct {
	n, most int64
	done    chan error
}

// NewCommandReserver returns a reserver whose calls go to q (a pool: each call is a transaction
// of its own).
func NewCommandReserver(q *db.Queries) *CommandReserver {
	return &CommandReserver{q: q, tenants: map[uuid.UUID]*reserveQueue{}}
}

// Reserve reserves n commands of tenant against the commandsPerMinute cap that ctx carries,
// before the create's own transaction and outside it, committing without waiting for the disk.
// A refusal is an error that CommandsRefusal turns into the cap's. Reserved commands count even
// if the create then fails, is a replay of its idempotency key, or ctx ends while the call that
// carries them is in flight, which errs towards refusing.
func (r *CommandReserver) Reserve(ctx context.Context, tenant uuid.UUID, n int) error {
	ask := &reserveAsk{n: int64(n), most: int64(LimitsFrom(ctx).Of(CommandsPerMinute)), done: make(chan error, 1)}
	r.mu.Lock()
	q, busy := r.tenants[tenant]
	if !busy {
		q = &reserveQueue{}
		r.tenants[tenant] = q
	}
	q.waiting = append(q.waiting, ask)
	r.mu.Unlock()
	if !busy {
		go r.drain(context.WithoutCancel(ctx), tenant, q)
	}
	select {
	case err := <-ask.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// drain makes the tenant's calls, one at a time, until none is waiting.
func (r *CommandReserver) drain(ctx context.Context, tenant uuid.UUID, q *reserveQueue) {
	for {
		r.mu.Lock()
		batch := q.waiting
		if len(batch) > MaxReserveBatch {
			batch = batch[:MaxReserveBatch:MaxReserveBatch]
		}
		q.waiting = q.waiting[len(batch):]
		if len(batch) == 0 {
			delete(r.tenants, tenant)
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		r.call(ctx, tenant, batch)
	}
}

// call decides batch in one database call and answers each of its callers.
func (r *CommandReserver) call(ctx context.Context, tenant uuid.UUID, batch []*reserveAsk) {
	ns := make([]int64, len(batch))
	mosts := make([]int64, len(batch))
	for i, a := range batch {
		ns[i], mosts[i] = a.n, a.most
	}
	ctx, cancel := context.WithTimeout(ctx, reserveTimeout)
	defer cancel()
	answer, err := r.q.ReserveCommands(ctx, db.ReserveCommandsParams{TenantID: tenant, Commands: ns, MaxCommands: mosts})
	if err == nil && len(answer) != len(batch)+1 {
		err = fmt.Errorf("the database answered %d numbers for %d reservations", len(answer), len(batch))
	}
	for i, a := range batch {
		switch {
		case err != nil:
			a.done <- err
		case answer[i] != 0:
			a.done <- &commandsRefused{total: answer[i], retry: answer[len(batch)]}
		default:
			a.done <- nil
		}
	}
}

// commandsRefused is a reservation's refusal: total is the commands of the minute it would have
// made (its own included), retry the seconds until the minute's oldest second leaves it.
type commandsRefused struct{ total, retry int64 }

func (e *commandsRefused) Error() string {
	return fmt.Sprintf("tenant cap %s: %d commands in the last minute with these", CommandsPerMinute, e.total)
}
