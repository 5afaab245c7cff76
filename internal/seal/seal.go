// Package seal encrypts what the database must keep but must not hold in the clear (PKI keys,
// stored responses that carry a secret) under the deployment secret: AES-256-GCM with a key
// derived by HKDF-SHA256 for each purpose, so one purpose's ciphertext cannot be opened as
// another's.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
)

// MinSecretLen is the shortest deployment secret accepted.
const MinSecretLen = 32

// version prefixes every sealed value, so the scheme can change without ambiguity.
const version byte = 1

// ErrOpen is returned for a value that was not sealed by this sealer (other secret, other
// purpose, other associated data) or was altered.
var ErrOpen = errors.New("seal: cannot open: wrong secret or purpose, or tampered data")

// Sealer seals and opens values for one purpose.
type Sealer struct {
	aead cipher.AEAD
}

// New derives the key for purpose ("idempotency", "pki", …) from the deployment secret.
func New(secret, purpose string) (*Sealer, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("seal: the deployment secret must be at least %d characters", MinSecretLen)
	}
	key, err := hkdf.Key(sha256.New, []byte(secret), nil, "better-compute seal v1 "+purpose, 32)
	if err != nil {
		return nil, fmt.Errorf("seal: derive key: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// Seal encrypts plaintext, binding it to aad (for example the row's key), which Open must be
// given again.
func (s *Sealer) Seal(plaintext, aad []byte) []byte {
	out := make([]byte, 1+s.aead.NonceSize(), 1+s.aead.NonceSize()+len(plaintext)+s.aead.Overhead())
	out[0] = version
	_, _ = rand.Read(out[1:])
	return s.aead.Seal(out, out[1:1+s.aead.NonceSize()], plaintext, aad)
}

// Open decrypts a value from Seal.
func (s *Sealer) Open(sealed, aad []byte) ([]byte, error) {
	n := s.aead.NonceSize()
	if len(sealed) < 1+n || sealed[0] != version {
		return nil, ErrOpen
	}
	pt, err := s.aead.Open(nil, sealed[1:1+n], sealed[1+n:], aad)
	if err != nil {
		return nil, ErrOpen
	}
	return pt, nil
}
