package fleet

import (
	"fmt"
	"slices"

	"github.com/better-compute/better-compute/internal/apierr"
)

// MaxTunnelPorts bounds the ports a node spec or a pool allows tunnels to.
const MaxTunnelPorts = 64

// ValidateTunnelPorts checks the tunnel ports of a node spec or a pool (field names them in
// errors): at most MaxTunnelPorts, each 1 to 65535. It returns them sorted without duplicates,
// and nil for none.
func ValidateTunnelPorts(field string, ports []int32) ([]int32, error) {
	if len(ports) > MaxTunnelPorts {
		return nil, apierr.InvalidArgument(field, "at most %d ports, got %d", MaxTunnelPorts, len(ports))
	}
	for i, p := range ports {
		if p < 1 || p > 65535 {
			return nil, apierr.InvalidArgument(fmt.Sprintf("%s[%d]", field, i), "must be a port, 1 to 65535, got %d", p)
		}
	}
	if len(ports) == 0 {
		return nil, nil
	}
	out := slices.Clone(ports)
	slices.Sort(out)
	return slices.Compact(out), nil
}
