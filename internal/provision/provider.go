// Package provision holds the vocabulary of machines that the control plane creates, boots,
// joins and destroys through providers (bare metal over Redfish, cloud instances, dev's
// simulator): the provider contract, a machine's lifecycle and the tags that tie a provider's
// resources to their machines. The provision module (internal/modules/provision) drives it; the
// providers implement Provider.
package provision

import (
	"context"
	"encoding/json"
	"errors"
)

// Provider creates, inspects, powers and destroys the machines of one machine class. Every call
// is idempotent on the provider's side, so that a controller that dies after the provider acted
// neither duplicates nor orphans a machine: Create with a ClientToken it has seen returns the
// machine it made then, and Delete of a machine that is gone succeeds.
type Provider interface {
	// Create starts a machine for req, or returns the one an earlier Create with the same
	// ClientToken started.
	Create(ctx context.Context, req CreateRequest) (Machine, error)
	// Get returns the machine with the provider's id, or an error wrapping ErrNotFound.
	Get(ctx context.Context, providerID string) (Machine, error)
	// Power turns a machine on or off, or resets it.
	Power(ctx context.Context, providerID string, action PowerAction) error
	// Delete destroys the machine (for bare metal: powers it off, ejects its media and frees
	// it); deleting a machine that is already gone succeeds.
	Delete(ctx context.Context, providerID string) error
	// List lists every machine the provider holds for this deployment (tagged TagDeployment),
	// for the orphan sweep.
	List(ctx context.Context) ([]Machine, error)
}

// Factory makes a class's provider from its parameters (the class's JSON, validated by the
// factory) and its credentials, opened from their seal. A provider that calls endpoints over
// the network checks them with egress.CheckEndpoint (a refused endpoint is a *FieldError) and
// calls them with egress.Client only, so the deployment's egress policy holds for every request.
type Factory func(params json.RawMessage, credentials []byte, egress Egress) (Provider, error)

// CreateRequest is what a provider needs to start one machine.
type CreateRequest struct {
	// ClientToken is the machine's id: the provider's idempotency key (EC2's ClientToken, a
	// claim tag on a bare-metal system).
	ClientToken string
	// Name is the machine's name for people and its hostname where the provider sets one.
	Name string
	// Tags go on the provider's resource: at least TagMachine and TagDeployment.
	Tags map[string]string
	// Join is how the booted machine joins.
	Join Join
}

// Join is what a booted machine needs to join the fleet as the node it is meant to become.
type Join struct {
	// Token is a single-use join token minted for this machine alone (bcj_…).
	Token string
	// Gateway is the gateway endpoint, host:port.
	Gateway string
	// RootCA is the PEM of the deployment's root CA, which the daemon pins.
	RootCA []byte
	// BootConfigURL, when set, serves Token, Gateway and RootCA once, to the first fetch: how
	// a bare-metal machine gets them through the boot configuration it fetches, rather than in
	// media or user data that outlive the boot.
	BootConfigURL string
}

// Machine is a provider's view of one machine.
type Machine struct {
	// ProviderID is the provider's id: an instance id, a Redfish system path.
	ProviderID string
	// Tags are the resource's tags, TagMachine among them when the control plane made it.
	Tags map[string]string
	// State is the provider's state of the machine.
	State ProviderState
	// Addresses are its IP addresses, when known.
	Addresses []string
}

// ProviderState is a machine's state at its provider.
type ProviderState string

// The provider states.
const (
	// ProviderPending is created or powering on, not yet running.
	ProviderPending ProviderState = "pending"
	// ProviderRunning is powered on and booting or booted.
	ProviderRunning ProviderState = "running"
	// ProviderStopped is powered off but still held.
	ProviderStopped ProviderState = "stopped"
	// ProviderGone is terminated or released.
	ProviderGone ProviderState = "gone"
)

// PowerAction is what Power does.
type PowerAction string

// The power actions.
const (
	PowerOn    PowerAction = "on"
	PowerOff   PowerAction = "off"
	PowerReset PowerAction = "reset"
)

// Tags every provider puts on the resources it makes.
const (
	// TagMachine is the machine's id.
	TagMachine = "better-compute/machine"
	// TagDeployment names the deployment (its trust domain), so deployments sharing an
	// account do not take each other's machines for orphans.
	TagDeployment = "better-compute/deployment"
)

// ErrNotFound is wrapped by providers' errors for a machine that does not exist.
var ErrNotFound = errors.New("provision: no such machine at the provider")
