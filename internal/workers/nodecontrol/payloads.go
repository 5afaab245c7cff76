package nodecontrol

import (
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
)

// The outbox payloads the node reconcilers write, as typed structs marshalled by encoding/json:
// a hostname is the node's own text, and a format verb (%q) would write Go escapes that are not
// JSON, failing the insert and with it every later attempt of the reconcile.

// nodeTransition is the payload of a node's state change, node.drained among them.
type nodeTransition struct {
	ID       uuid.UUID `json:"id"`
	Hostname string    `json:"hostname"`
	From     string    `json:"from"`
	To       string    `json:"to"`
}

// commandCreated is the payload of command.created, with the keys commands/create gives it.
type commandCreated struct {
	ID     uuid.UUID `json:"id"`
	NodeID uuid.UUID `json:"node_id"`
	Type   string    `json:"type"`
}

// encodePayload marshals an outbox payload.
func encodePayload(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode event payload: %w", err)
	}
	return b, nil
}
