package fleet

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Spec is a node's desired state as nodes.spec stores it. A field left out is not managed: the
// initial spec, {}, changes nothing on the node.
type Spec struct {
	// Labels, when not nil, are exactly the labels the node should have (an empty map: none).
	Labels map[string]string `json:"labels,omitzero"`
	// Taints, when not nil, are exactly the taints the node should have.
	Taints []Taint `json:"taints,omitzero"`
	// DaemonVersion is the release version the node's daemon should report; empty for any. An
	// upgrade workflow (origin "spec") brings nodes to it. (Specs stored before releases were
	// signed may still hold daemonUrl and daemonSha256; they are ignored.)
	DaemonVersion string `json:"daemonVersion,omitempty"`
	// Config is the daemon configuration (a JSON object) the node should have applied; nil for
	// none managed.
	Config json.RawMessage `json:"config,omitempty"`
	// Secrets are the names of the tenant's secrets the node may fetch from its gateway (which
	// reads them from nodes.spec), sorted and without duplicates.
	Secrets []string `json:"secrets,omitempty"`
	// TunnelPorts are the ports on the node's loopback that principals of the node's tenant may
	// open tunnels to (tunnels/create), sorted and without duplicates (ValidateTunnelPorts).
	TunnelPorts []int32 `json:"tunnelPorts,omitempty"`
}

// DecodeSpec reads a stored spec; an empty one is the zero Spec.
func DecodeSpec(b []byte) (Spec, error) {
	var s Spec
	if len(b) == 0 {
		return s, nil
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return Spec{}, fmt.Errorf("decode node spec: %w", err)
	}
	if bytes.Equal(bytes.TrimSpace(s.Config), []byte("null")) {
		s.Config = nil
	}
	return s, nil
}

// Encode is the JSON object nodes.spec stores.
func (s Spec) Encode() []byte {
	b, err := json.Marshal(s)
	if err != nil {
		// Only an invalid Config can fail; the API validates it before it gets here.
		panic(fmt.Sprintf("encode node spec: %v", err))
	}
	return b
}
