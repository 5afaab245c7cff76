package provision

import (
	"fmt"

	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/provision"
)

// egressOf is the policy for providers' endpoints that cfg sets.
func egressOf(cfg Config) provision.Egress {
	return provision.Egress{AllowPrivate: cfg.AllowPrivateEndpoints}
}

// opener makes a class's provider from the enabled factories, opening its credentials.
type opener struct {
	providers Providers
	seal      sealers
	// egress is the deployment's policy for the providers' endpoints.
	egress provision.Egress
}

// open returns the provider of class c. A class whose kind is no longer enabled, or whose
// credentials no longer open (the deployment secret changed), cannot become usable by retrying:
// those errors are permanent.
func (o opener) open(c provisiondb.ProvisionClass) (provision.Provider, error) {
	f, ok := o.providers[c.Provider]
	if !ok {
		return nil, provision.Permanent(fmt.Errorf("class %s: provider %q is not enabled in this deployment", c.Name, c.Provider))
	}
	var creds []byte
	if c.Credentials != nil {
		var err error
		if creds, err = o.seal.credentials.Open(c.Credentials, classAAD(c.TenantID, c.Name)); err != nil {
			return nil, provision.Permanent(fmt.Errorf("class %s: open its credentials: %w", c.Name, err))
		}
	}
	p, err := f(providerParams(c.Params), creds, o.egress)
	if err != nil {
		return nil, provision.Permanent(fmt.Errorf("class %s: %w", c.Name, err))
	}
	return p, nil
}
