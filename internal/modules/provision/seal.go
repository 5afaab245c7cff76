package provision

import (
	"fmt"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/internal/seal"
)

// sealers seal what the module stores but must not hold in the clear, each under a key of its
// own purpose derived from the deployment secret.
type sealers struct {
	// credentials seals a class's credentials, bound to its tenant and name.
	credentials *seal.Sealer
	// tokens seals a machine's join token until it joined, bound to the machine's id.
	tokens *seal.Sealer
	// boot seals a machine's boot ticket and boot configuration, bound to the machine's id.
	boot *seal.Sealer
}

func newSealers(secret string) (sealers, error) {
	creds, err := seal.New(secret, "provision-credentials")
	if err != nil {
		return sealers{}, fmt.Errorf("provision: %w", err)
	}
	tokens, err := seal.New(secret, "provision-join-token")
	if err != nil {
		return sealers{}, fmt.Errorf("provision: %w", err)
	}
	boot, err := seal.New(secret, "provision-boot-config")
	if err != nil {
		return sealers{}, fmt.Errorf("provision: %w", err)
	}
	return sealers{credentials: creds, tokens: tokens, boot: boot}, nil
}

// classAAD binds a class's sealed credentials to the class, so they cannot be moved to another.
func classAAD(tenant uuid.UUID, name string) []byte { return []byte(tenant.String() + "/" + name) }
