// Package secret holds what the API and the gateway share about node secrets: the sealer of
// their values under the deployment secret (the API seals, the gateway opens for the nodes whose
// NodeSpec names them) and the syntax of their names. It imports only the standard library and
// plumbing.
package secret

import (
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"

	"github.com/google/uuid"

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
		return nil, fmt.Errorf("secret: derive digest key: %w", err)
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

// Digest is a keyed HMAC of a value, under a key derived from the deployment secret: it stands
// in for a value where only equality matters (the API's idempotency request hashes), and no one
// without the deployment secret can test guesses of the value against it.
func (s *Sealer) Digest(value []byte) []byte {
	m := hmac.New(sha256.New, s.digestKey)
	m.Write(value)
	return m.Sum(nil)
}
