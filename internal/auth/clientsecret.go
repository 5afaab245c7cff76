package auth

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/internal/seal"
)

// clientSecretPurpose keys the sealing of auth methods' OIDC client secrets: apart from every
// other purpose, so no other sealed value opens as a client secret.
const clientSecretPurpose = "auth-method-client-secret"

// NewClientSecretSealer returns the sealer of auth methods' client secrets under the deployment
// secret; authMethods/* seal with it and the sign-in opens with it.
func NewClientSecretSealer(deploymentSecret string) (*seal.Sealer, error) {
	s, err := seal.New(deploymentSecret, clientSecretPurpose)
	if err != nil {
		return nil, fmt.Errorf("auth method client secrets: %w", err)
	}
	return s, nil
}

// SealClientSecret seals an auth method's client secret, bound to the method's id so it cannot
// be moved to another method's row. An empty secret stays empty (a public client).
func SealClientSecret(s *seal.Sealer, methodID uuid.UUID, secret string) []byte {
	if secret == "" {
		return []byte{}
	}
	return s.Seal([]byte(secret), methodID[:])
}

// OpenClientSecret opens a secret sealed by SealClientSecret for the same method.
func OpenClientSecret(s *seal.Sealer, methodID uuid.UUID, sealed []byte) (string, error) {
	if len(sealed) == 0 {
		return "", nil
	}
	b, err := s.Open(sealed, methodID[:])
	if err != nil {
		return "", fmt.Errorf("open client secret of auth method %s: %w", methodID, err)
	}
	return string(b), nil
}
