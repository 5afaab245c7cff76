package secrets

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	secretsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/secrets/v1"
	"github.com/better-compute/better-compute/internal/seal"
)

// SealPurpose is the seal purpose of node secrets' values.
const SealPurpose = "node-secret"

// Sealer seals node secrets' values for the API and opens them for the gateway: AES-256-GCM
// under the deployment secret (seal purpose "node-secret"), bound to the secret's id, so a value
// copied to another row does not open.
type Sealer struct {
	aead *seal.Sealer
	// digestKey keys the HMAC that stands in for a value in idempotency request hashes.
	digestKey []byte
}

// NewSealer returns the sealer of node secrets, from the deployment secret.
func NewSealer(deploymentSecret string) (*Sealer, error) {
	aead, err := seal.New(deploymentSecret, SealPurpose)
	if err != nil {
		return nil, err
	}
	key, err := hkdf.Key(sha256.New, []byte(deploymentSecret), nil, "better-compute node-secret digest v1", 32)
	if err != nil {
		return nil, fmt.Errorf("secrets: derive digest key: %w", err)
	}
	return &Sealer{aead: aead, digestKey: key}, nil
}

// Seal seals the value of secret id for storage.
func (s *Sealer) Seal(id uuid.UUID, value []byte) []byte { return s.aead.Seal(value, id[:]) }

// Open opens the stored value of secret id.
func (s *Sealer) Open(id uuid.UUID, sealed []byte) ([]byte, error) {
	v, err := s.aead.Open(sealed, id[:])
	if err != nil {
		return nil, fmt.Errorf("open secret %s: %w", id, err)
	}
	return v, nil
}

// redact returns the request with its value replaced by a keyed digest, for the admission's
// request hash: a retry with the same value still matches, and a different value under the same
// Idempotency-Key is still refused, but no one without the deployment secret can test guesses of
// the value against the stored hash.
func (s *Sealer) redact(req proto.Message) proto.Message {
	switch r := req.(type) {
	case *secretsv1.CreateRequest:
		return &secretsv1.CreateRequest{Name: r.GetName(), Value: s.digest(r.GetValue())}
	case *secretsv1.UpdateRequest:
		return &secretsv1.UpdateRequest{Name: r.GetName(), Value: s.digest(r.GetValue())}
	}
	return req
}

func (s *Sealer) digest(value []byte) []byte {
	m := hmac.New(sha256.New, s.digestKey)
	m.Write(value)
	return m.Sum(nil)
}
