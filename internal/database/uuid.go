package database

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// encodeUUIDs makes a connection encode uuid.UUID parameters as binary uuid directly. Without it
// pgx tries binary, fails (building an error), falls back to the string from Value() and parses
// it again, for every id of every statement.
func encodeUUIDs(_ context.Context, c *pgx.Conn) error {
	m := c.TypeMap()
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryWrapUUID}, m.TryWrapEncodePlanFuncs...)
	return nil
}

type uuidPlan struct{ next pgtype.EncodePlan }

func (p *uuidPlan) SetNext(n pgtype.EncodePlan) { p.next = n }

func (p *uuidPlan) Encode(v any, buf []byte) ([]byte, error) {
	return p.next.Encode([16]byte(v.(uuid.UUID)), buf)
}

func tryWrapUUID(v any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	if u, ok := v.(uuid.UUID); ok {
		return &uuidPlan{}, [16]byte(u), true
	}
	return nil, nil, false
}
