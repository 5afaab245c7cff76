package config

import (
	"time"

	"github.com/better-compute/better-compute/internal/tunnelhop"
)

// Tunnels bound the tunnels an API process relays (tunnels.*; docs/tunnels.md).
type Tunnels struct {
	// IdleTimeout closes a tunnel that carried nothing either way for this long (close code
	// 4000). Default 1h, from 1s to 168h.
	IdleTimeout time.Duration `yaml:"idleTimeout"`
	// PerNode caps the open tunnels to one node, of every tenant together; an upgrade over it is
	// refused with 429. Default 256, from 1 to 100000.
	PerNode int `yaml:"perNode"`
	// PerTenant caps the open tunnels of one tenant; an upgrade over it is refused with 429.
	// Default 1024, from 1 to 1000000.
	PerTenant int `yaml:"perTenant"`
}

// Bounds of tunnels.*.
const (
	minTunnelIdle       = time.Second
	maxTunnelIdle       = 7 * 24 * time.Hour
	maxTunnelsPerNode   = 100_000
	maxTunnelsPerTenant = 1_000_000
)

func defaultTunnels() Tunnels {
	return Tunnels{IdleTimeout: tunnelhop.DefaultIdleTimeout, PerNode: tunnelhop.DefaultPerNode, PerTenant: tunnelhop.DefaultPerTenant}
}

func (c *Config) checkTunnels(ps *problems) {
	t := c.Tunnels
	if t.IdleTimeout < minTunnelIdle || t.IdleTimeout > maxTunnelIdle {
		ps.add("tunnels.idleTimeout", "must be from %s to %s, got %s", minTunnelIdle, maxTunnelIdle, t.IdleTimeout)
	}
	if t.PerNode < 1 || t.PerNode > maxTunnelsPerNode {
		ps.add("tunnels.perNode", "must be from 1 to %d, got %d", maxTunnelsPerNode, t.PerNode)
	}
	if t.PerTenant < 1 || t.PerTenant > maxTunnelsPerTenant {
		ps.add("tunnels.perTenant", "must be from 1 to %d, got %d", maxTunnelsPerTenant, t.PerTenant)
	}
}
