package daemon

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/better-compute/better-compute/internal/command"
)

// ConfigJSON is the canonical form of a configure command's config, the bytes bcd writes to its
// state directory: JSON with sorted keys, indented by two spaces, ending in a newline, so that
// the same configuration is always the same bytes (and the same SHA-256). A missing config, or
// one over command.MaxStructBytes as JSON, is an error.
func ConfigJSON(cfg *structpb.Struct) ([]byte, error) {
	if cfg == nil {
		return nil, errors.New("configure: the payload has no config")
	}
	raw, err := protojson.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("configure: %w", err)
	}
	if len(raw) > command.MaxStructBytes {
		return nil, fmt.Errorf("configure: the config is %d bytes as JSON; at most %d", len(raw), command.MaxStructBytes)
	}
	// encoding/json sorts object keys.
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("configure: %w", err)
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("configure: %w", err)
	}
	return append(data, '\n'), nil
}

// ConfigSHA256 is the hex SHA-256 of a configuration's canonical form (ConfigJSON's bytes), as a
// configure command's result reports it.
func ConfigSHA256(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}
