// Package event is the catalog of events Better Compute announces: every type a webhook can
// subscribe to and events/list returns, each a Go type here with its payload, and the one way
// they reach the outbox. Each event is written in the same transaction as the change it
// announces, so an event exists exactly when its change committed.
//
// Payloads are marshalled with encoding/json; every key is camelCase, as the API's JSON. A type's
// doc comment says when it is emitted; docs/events.md is generated from this package
// (go run ./internal/event/eventsdoc) and checked in CI like other generated code.
package event

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
)

// Event is one event of the catalog: its type name (what webhooks filter on, for example
// "node.cordoned"), its subject (what it is about, "node/<id>"; events of one subject are
// delivered in order), and itself as the JSON payload.
type Event interface {
	Type() string
	Subject() string
}

// row is an event encoded for the outbox.
type row struct {
	typ, subject string
	payload      []byte
}

// encode marshals ev's payload.
func encode(ev Event) (row, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return row{}, fmt.Errorf("encode %s event: %w", ev.Type(), err)
	}
	return row{typ: ev.Type(), subject: ev.Subject(), payload: b}, nil
}

// Emit writes ev to the outbox of tenant in q's transaction. It is the one function that writes
// a single event; Batch writes several in one statement.
func Emit(ctx context.Context, q *db.Queries, tenant uuid.UUID, ev Event) error {
	r, err := encode(ev)
	if err != nil {
		return err
	}
	if err := q.InsertOutboxEvent(ctx, db.InsertOutboxEventParams{
		TenantID: tenant, Type: r.typ, Subject: r.subject, Payload: r.payload,
	}); err != nil {
		return fmt.Errorf("write %s event: %w", r.typ, err)
	}
	return nil
}

// Emitter takes ev, an event of tenant, into the outbox of the caller's transaction: an API
// call's admission Tx.Emit, or a worker's Batch.Add. Functions that make a change and announce
// it (capacity.EndLeases) take one, so their events go wherever the caller's other events go.
type Emitter func(tenant uuid.UUID, ev Event) error

// Batch collects events to write together in one statement, in the order they were added: the
// workers' batches (Emit) and an API call's admission (Record). The zero Batch is empty.
type Batch struct {
	tenants  []uuid.UUID
	types    []string
	subjects []string
	payloads [][]byte
}

// Add encodes ev, an event of tenant, into the batch.
func (b *Batch) Add(tenant uuid.UUID, ev Event) error {
	r, err := encode(ev)
	if err != nil {
		return err
	}
	b.tenants = append(b.tenants, tenant)
	b.types = append(b.types, r.typ)
	b.subjects = append(b.subjects, r.subject)
	b.payloads = append(b.payloads, r.payload)
	return nil
}

// Len is the number of events in the batch.
func (b *Batch) Len() int { return len(b.types) }

// Emit writes the batch to the outbox in q's transaction, in one statement; an empty batch
// writes nothing.
func (b *Batch) Emit(ctx context.Context, q *db.Queries) error {
	if b.Len() == 0 {
		return nil
	}
	payloads := make([]string, len(b.payloads))
	for i, p := range b.payloads {
		payloads[i] = string(p)
	}
	if err := q.InsertOutboxEvents(ctx, db.InsertOutboxEventsParams{
		TenantIds: b.tenants, Types: b.types, Subjects: b.subjects, Payloads: payloads,
	}); err != nil {
		return fmt.Errorf("write %d events: %w", b.Len(), err)
	}
	return nil
}

// Record puts the batch into the event columns of an admission's statement, which writes them
// with the call's audit row in one round trip (internal/admission).
func (b *Batch) Record(p *db.RecordAdmissionParams) {
	p.EventTenants = append([]uuid.UUID{}, b.tenants...)
	p.EventTypes = append([]string{}, b.types...)
	p.EventSubjects = append([]string{}, b.subjects...)
	p.EventPayloads = append([][]byte{}, b.payloads...)
}
