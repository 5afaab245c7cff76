// Package admission runs a mutating API call as one transaction: the handler's change, its audit
// row, the events it emits into the outbox and, for idempotent calls with an Idempotency-Key,
// the stored response, all commit together or not at all. A retry with the same key returns the
// stored response; the same key with a different request is refused. What must follow the
// commit, such as waking the reconcilers of the work the call enqueued, is asked for on the
// transaction (Tx.Wake, Tx.AfterCommit) and happens only once it committed.
package admission

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/guard"
	"github.com/better-compute/better-compute/internal/seal"
)

// Tx is a call's transaction, handed to its handler.
type Tx struct {
	// Q runs the generated queries inside the transaction.
	Q      *db.Queries
	tx     *database.PipeTx
	target string
	events event.Batch
	// after and wakes are what Do does once the transaction commits.
	after []func(context.Context)
	wakes []string
}

// Target records what the call acted on ("principal/<id>") for its audit row.
func (t *Tx) Target(kind string, id any) { t.target = fmt.Sprintf("%s/%v", kind, id) }

// Emit writes ev, an event of tenant, to the outbox in the call's transaction (with its audit
// row, in one statement). Events of one subject are delivered in the order they were emitted.
func (t *Tx) Emit(tenant uuid.UUID, ev event.Event) error { return t.events.Add(tenant, ev) }

// DB is the call's transaction, for a module's generated queries (its own sqlc package's New):
// what they write commits or rolls back with the call.
func (t *Tx) DB() db.DBTX { return t.tx }

// Following is the transaction's slot for a read to go with its next statement, in one round
// trip (database.PipeTx.Following): run a generated :one query on it before that statement, and
// again after it for its row.
func (t *Tx) Following() database.Following { return t.tx.Following() }

// Wake has the reconcilers of kind woken once the transaction commits, so that the keys it
// enqueued for them are reconciled at once rather than at their next poll. Nothing is woken
// when the call fails and rolls back, or when it replays a stored response; a kind named
// several times is woken once.
func (t *Tx) Wake(kind string) {
	if !slices.Contains(t.wakes, kind) {
		t.wakes = append(t.wakes, kind)
	}
}

// AfterCommit has fn run once the transaction commits, and never when it rolls back or when the
// call replays a stored response. The functions run in the order they were added, on the call's
// goroutine after its connection went back to the pool, before the kinds of Wake are woken (so
// those wakes follow what they enqueue); their context is the call's, not cancelled when the
// caller goes away. fn must not fail the call, which has committed: it handles its own errors,
// and should be quick.
func (t *Tx) AfterCommit(fn func(context.Context)) { t.after = append(t.after, fn) }

// committed runs the transaction's post-commit work.
func (t *Tx) committed(ctx context.Context, waker Waker) {
	ctx = context.WithoutCancel(ctx)
	for _, fn := range t.after {
		fn(ctx)
	}
	if waker == nil {
		return
	}
	for _, kind := range t.wakes {
		waker.Wake(kind)
	}
}

// Waker wakes the reconcilers of a kind in every process (reconcile.Waker). A wake only
// shortens the wait: a reconciler that misses one still finds its due keys at its next poll.
type Waker interface {
	Wake(kind string)
}

// Admitter runs calls' transactions on one database.
type Admitter struct {
	pool *pgxpool.Pool
	// sealer encrypts stored responses: some carry a secret shown once, such as a new API key.
	sealer *seal.Sealer
	waker  Waker
}

// New returns an admitter over pool that seals stored responses with sealer and wakes the kinds
// of Tx.Wake with waker; with a nil waker the reconcilers find their keys by polling.
func New(pool *pgxpool.Pool, sealer *seal.Sealer, waker Waker) *Admitter {
	return &Admitter{pool: pool, sealer: sealer, waker: waker}
}

// Do runs fn in a transaction with the call's audit row, outbox events and idempotent
// response, and commits them together; then it does what fn asked for after the commit
// (Tx.AfterCommit, Tx.Wake). It must be called from a handler behind the guard.
func Do[Res proto.Message](ctx context.Context, a *Admitter, req proto.Message, fn func(context.Context, *Tx) (Res, error)) (Res, error) {
	res, tx, err := run(ctx, a, req, fn)
	if err == nil && tx != nil {
		tx.committed(ctx, a.waker)
	}
	return res, err
}

// run is Do up to the commit. It returns the committed transaction, or a nil one with a
// replayed response.
func run[Res proto.Message](ctx context.Context, a *Admitter, req proto.Message, fn func(context.Context, *Tx) (Res, error)) (Res, *Tx, error) {
	var zero Res
	call, ok := guard.CallFrom(ctx)
	if !ok || call.Method == nil || call.Principal == nil {
		return zero, nil, fmt.Errorf("admission: no authenticated call in context")
	}
	ptx, err := database.BeginPipe(ctx, a.pool)
	if err != nil {
		return zero, nil, fmt.Errorf("admission: begin: %w", err)
	}
	defer ptx.End(ctx)
	tx := &Tx{Q: db.New(ptx), tx: ptx}

	var reqHash []byte
	if call.IdempotencyKey != "" {
		reqHash, err = requestHash(call.Method.Procedure, req)
		if err != nil {
			return zero, nil, err
		}
		claimed, err := tx.Q.ClaimIdempotencyKey(ctx, db.ClaimIdempotencyKeyParams{
			PrincipalID: call.Principal.ID, Key: call.IdempotencyKey,
			Method: call.Method.Procedure, RequestHash: reqHash,
		})
		if err != nil {
			return zero, nil, fmt.Errorf("admission: claim idempotency key: %w", err)
		}
		if claimed == 0 {
			res, err := replay[Res](ctx, a, tx.Q, call, reqHash)
			return res, nil, err
		}
	}

	res, err := fn(ctx, tx)
	if err != nil {
		return zero, nil, err
	}
	p := call.Principal
	rec := db.RecordAdmissionParams{
		TenantID: &p.TenantID, PrincipalID: &p.ID,
		Method: call.Method.Group + "/" + call.Method.Name, Target: tx.target, RequestID: call.RequestID,
	}
	tx.events.Record(&rec)
	if call.IdempotencyKey != "" {
		b, err := proto.Marshal(res)
		if err != nil {
			return zero, nil, fmt.Errorf("admission: encode response: %w", err)
		}
		rec.IdempotencyKey, rec.Response = call.IdempotencyKey, a.sealer.Seal(b, reqHash)
	}
	// The audit row, the outbox events and the stored response go in one statement, sent
	// together with COMMIT: one round trip.
	ptx.CommitNext()
	if err := tx.Q.RecordAdmission(ctx, rec); err != nil {
		return zero, nil, fmt.Errorf("admission: record audit, events and response, and commit: %w", err)
	}
	call.Admitted = true
	return res, tx, nil
}

// replay answers a call whose Idempotency-Key was used before, by a committed call.
func replay[Res proto.Message](ctx context.Context, a *Admitter, q *db.Queries, call *guard.Call, reqHash []byte) (Res, error) {
	var zero Res
	row, err := q.GetIdempotencyKey(ctx, db.GetIdempotencyKeyParams{PrincipalID: call.Principal.ID, Key: call.IdempotencyKey})
	if err != nil {
		return zero, fmt.Errorf("admission: read idempotency key: %w", err)
	}
	if row.Method != call.Method.Procedure || !bytes.Equal(row.RequestHash, reqHash) {
		return zero, apierr.FailedPrecondition("%s %q was already used for a different request (at %s); use a new key",
			guard.IdempotencyKeyHeader, call.IdempotencyKey, row.CreatedAt.UTC().Format(time.RFC3339))
	}
	b, err := a.sealer.Open(row.Response, reqHash)
	if err != nil {
		return zero, fmt.Errorf("admission: open stored response: %w", err)
	}
	res := zero.ProtoReflect().New().Interface().(Res)
	if err := proto.Unmarshal(b, res); err != nil {
		return zero, fmt.Errorf("admission: decode stored response: %w", err)
	}
	call.Replayed = true
	return res, nil
}

// requestHash identifies a request by method and deterministic encoding, so a retry matches and
// a different body under the same key does not.
func requestHash(procedure string, req proto.Message) ([]byte, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("admission: encode request: %w", err)
	}
	h := sha256.New()
	h.Write([]byte(procedure))
	h.Write([]byte{0})
	h.Write(b)
	return h.Sum(nil), nil
}
