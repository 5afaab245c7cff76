package gateway

import (
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
)

// The outbox payloads the gateway writes. They are typed structs marshalled by encoding/json,
// never strings put together with format verbs: %q writes Go escapes (\x01, \xff) that are not
// JSON, so a node's odd byte would fail the insert and end its session.

// nodeJoined is the payload of node.joined.
type nodeJoined struct {
	ID       uuid.UUID `json:"id"`
	Hostname string    `json:"hostname"`
}

// commandFinished is the payload of command.succeeded and command.failed.
type commandFinished struct {
	ID     uuid.UUID `json:"id"`
	NodeID uuid.UUID `json:"nodeId"`
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
