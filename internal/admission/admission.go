// Package admission runs a mutating API call as one transaction: the handler's change, its audit
// row, the events it emits into the outbox and, for idempotent calls with an Idempotency-Key,
// the stored response, all commit together or not at all. A retry with the same key returns the
// stored response; the same key with a different request is refused.
package admission

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
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
}

// Target records what the call acted on ("principal/<id>") for its audit row.
func (t *Tx) Target(kind string, id any) { t.target = fmt.Sprintf("%s/%v", kind, id) }

// Emit writes ev, an event of tenant, to the outbox in the call's transaction (with its audit
// row, in one statement). Events of one subject are delivered in the order they were emitted.
func (t *Tx) Emit(tenant uuid.UUID, ev event.Event) error { return t.events.Add(tenant, ev) }

// DB is the call's transaction, for a module's generated queries (its own sqlc package's New):
// what they write commits or rolls back with the call.
func (t *Tx) DB() db.DBTX { return t.tx }

// Admitter runs calls' transactions on one database.
type Admitter struct {
	pool *pgxpool.Pool
	// sealer encrypts stored responses: some carry a secret shown once, such as a new API key.
	sealer *seal.Sealer
}

// New returns an admitter over pool that seals stored responses with sealer.
func New(pool *pgxpool.Pool, sealer *seal.Sealer) *Admitter {
	return &Admitter{pool: pool, sealer: sealer}
}

// Do runs fn in a transaction with the call's audit row, outbox events and idempotent
// response, and commits them together. It must be called from a handler behind the guard.
func Do[Res proto.Message](ctx context.Context, a *Admitter, req proto.Message, fn func(context.Context, *Tx) (Res, error)) (Res, error) {
	var zero Res
	call, ok := guard.CallFrom(ctx)
	if !ok || call.Method == nil || call.Principal == nil {
		return zero, fmt.Errorf("admission: no authenticated call in context")
	}
	ptx, err := database.BeginPipe(ctx, a.pool)
	if err != nil {
		return zero, fmt.Errorf("admission: begin: %w", err)
	}
	defer ptx.End(ctx)
	tx := &Tx{Q: db.New(ptx), tx: ptx}

	var reqHash []byte
	if call.IdempotencyKey != "" {
		reqHash, err = requestHash(call.Method.Procedure, req)
		if err != nil {
			return zero, err
		}
		claimed, err := tx.Q.ClaimIdempotencyKey(ctx, db.ClaimIdempotencyKeyParams{
			PrincipalID: call.Principal.ID, Key: call.IdempotencyKey,
			Method: call.Method.Procedure, RequestHash: reqHash,
		})
		if err != nil {
			return zero, fmt.Errorf("admission: claim idempotency key: %w", err)
		}
		if claimed == 0 {
			return replay[Res](ctx, a, tx.Q, call, reqHash)
		}
	}

	res, err := fn(ctx, tx)
	if err != nil {
		return zero, err
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
			return zero, fmt.Errorf("admission: encode response: %w", err)
		}
		rec.IdempotencyKey, rec.Response = call.IdempotencyKey, a.sealer.Seal(b, reqHash)
	}
	// The audit row, the outbox events and the stored response go in one statement, sent
	// together with COMMIT: one round trip.
	ptx.CommitNext()
	if err := tx.Q.RecordAdmission(ctx, rec); err != nil {
		return zero, fmt.Errorf("admission: record audit, events and response, and commit: %w", err)
	}
	call.Admitted = true
	return res, nil
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
