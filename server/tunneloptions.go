package server

import (
	"time"

	"github.com/better-compute/better-compute/server/internal/tunnels"
)

// TunnelOptions configure the tunnel endpoint, GET {basePath}/tunnels/{ticket} (config
// tunnels.*).
type TunnelOptions struct {
	// Dialer reaches the gateways' control APIs (a *tunnel.Dialer with the machine PKI's client
	// certificate); without one every upgrade is refused with 503.
	Dialer tunnels.Dialer
	// Instance names this API process in the rows of the tunnels it relays; a random name when
	// empty.
	Instance string
	// IdleTimeout ends a tunnel that carried nothing either way for this long;
	// tunnel.DefaultIdleTimeout when zero.
	IdleTimeout time.Duration
	// PerNode and PerTenant cap open tunnels (of any tenant on one node, of one tenant);
	// tunnel.DefaultPerNode and tunnel.DefaultPerTenant when zero.
	PerNode, PerTenant int
}
