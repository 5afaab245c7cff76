package process

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/better-compute/better-compute/internal/config"
)

// Memory a gateway is expected to need: a base for the process (its roles, pools and caches)
// and, for each session it may hold (limits.gatewaySessions), what one costs with headroom
// (docs/benchmarks.md: "Gateway session memory"), so that a gateway sized for 10,000 sessions
// keeps under 1 GiB.
const (
	baseMemoryBytes    = 192 << 20
	sessionMemoryBytes = 80 << 10
)

// setMemoryLimit gives a process that runs the gateway role a Go memory limit derived from the
// sessions it may hold, unless GOMEMLIMIT sets one: without it, the collector lets the heap
// grow to twice what ten thousand sessions keep alive before it runs. The limit is soft: past
// it the collector runs more often (at most half the CPU), it does not fail allocations. It
// returns the limit set, 0 when none was.
func setMemoryLimit(cfg *config.Config, roles map[string]bool, log *slog.Logger) int64 {
	if !roles[config.RoleGateway] || os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit := gatewayMemoryLimit(cfg.Limits.GatewaySessions)
	debug.SetMemoryLimit(limit)
	log.Info("memory limit set from limits.gatewaySessions (GOMEMLIMIT overrides)",
		"gateway_sessions", cfg.Limits.GatewaySessions, "memory_limit_bytes", limit)
	return limit
}

// gatewayMemoryLimit is the memory limit of a gateway that may hold sessions sessions.
func gatewayMemoryLimit(sessions int) int64 {
	return baseMemoryBytes + int64(sessions)*sessionMemoryBytes
}
