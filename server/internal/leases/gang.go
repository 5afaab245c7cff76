package leases

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	"github.com/better-compute/better-compute/gen/db"
	leasesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/leases/v1"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/gpuhealth"
)

// Bounds of a gang.
const (
	// MaxGangNodes is the most nodes a gang may ask for.
	MaxGangNodes = 1024
	// MaxGPUsPerNode is the most GPUs a gang may ask for on each node; no node has more.
	MaxGPUsPerNode = 64
)

// gang is a gang's shape as leases/create asked for it, checked; the zero gang is a lease of one
// node (or one that spans nodes by count).
type gang struct {
	nodes, perNode int32
	level          string
	required       bool
	onUnhealthy    gpuhealth.LeaseAction
}

// gangOf reads and checks the gang fields of a request. Its errors are InvalidArgument naming the
// field; the level is checked against the pool's levels later (checkLevel).
func gangOf(req *leasesv1.CreateRequest) (gang, error) {
	topo := req.GetGangTopology()
	action, ok := gpuhealth.LeaseActionFromProto(req.GetOnUnhealthyMember())
	if !ok {
		return gang{}, apierr.InvalidArgument("on_unhealthy_member", "unknown action %d", req.GetOnUnhealthyMember())
	}
	if req.GetNodes() == 0 {
		switch {
		case req.GetGpusPerNode() != 0:
			return gang{}, apierr.InvalidArgument("nodes", "is required with gpus_per_node (a gang is nodes × gpus_per_node)")
		case topo != nil:
			return gang{}, apierr.InvalidArgument("gang_topology", "only goes with nodes")
		case action != "":
			return gang{}, apierr.InvalidArgument("on_unhealthy_member", "only goes with nodes")
		}
		return gang{}, nil
	}
	g := gang{nodes: req.GetNodes(), perNode: req.GetGpusPerNode(), level: topo.GetLevel(), onUnhealthy: action}
	switch topo.GetMode() {
	case leasesv1.TopologyMode_TOPOLOGY_MODE_UNSPECIFIED, leasesv1.TopologyMode_TOPOLOGY_MODE_PREFERRED:
	case leasesv1.TopologyMode_TOPOLOGY_MODE_REQUIRED:
		g.required = true
	default:
		return gang{}, apierr.InvalidArgument("gang_topology.mode", "unknown mode %d", topo.GetMode())
	}
	switch {
	case g.nodes < 2 || g.nodes > MaxGangNodes:
		return gang{}, apierr.InvalidArgument("nodes", "must be 2 to %d, got %d (one node is a lease of gpus)", MaxGangNodes, g.nodes)
	case g.perNode < 1 || g.perNode > MaxGPUsPerNode:
		return gang{}, apierr.InvalidArgument("gpus_per_node", "must be 1 to %d, got %d", MaxGPUsPerNode, g.perNode)
	case req.GetGpus() != 0 && req.GetGpus() != g.nodes*g.perNode:
		return gang{}, apierr.InvalidArgument("gpus", "must be 0 or nodes × gpus_per_node (%d), got %d", g.nodes*g.perNode, req.GetGpus())
	case req.GetCpus() != 0 || req.GetMemoryBytes() != 0:
		return gang{}, apierr.InvalidArgument("cpus", "a gang takes GPUs, not CPUs and memory")
	case g.level != "" && !fleet.ValidLabelKey(g.level):
		return gang{}, apierr.InvalidArgument("gang_topology.level", "must be a node label key, got %q", g.level)
	case g.required && g.level == "":
		return gang{}, apierr.InvalidArgument("gang_topology.level", "is required when the mode is REQUIRED")
	}
	return g, nil
}

// checkLevel refuses a gang whose level is not one of the pool's topology levels.
func (g gang) checkLevel(levels []string) error {
	if g.level == "" || slices.Contains(levels, g.level) {
		return nil
	}
	if len(levels) == 0 {
		return apierr.FailedPreconditionField("gang_topology.level", "the pool declares no topology levels (pools/update topology_levels)")
	}
	return apierr.FailedPreconditionField("gang_topology.level", "the pool's topology levels are %s; %q is not one", strings.Join(levels, ", "), g.level)
}

// withGPUs is the request as admission counts it: a gang asks for all its GPUs.
func (g gang) withGPUs(req *leasesv1.CreateRequest) *leasesv1.CreateRequest {
	if g.nodes == 0 || req.GetGpus() == g.nodes*g.perNode {
		return req
	}
	out := proto.CloneOf(req)
	out.Gpus = g.nodes * g.perNode
	return out
}

// members reads the gangs of tenant's members in rank order, each with its domain under the pool's levels
// and its health: offline, or holding an unhealthy GPU of the gang.
func members(ctx context.Context, q *db.Queries, tenant uuid.UUID, gangs []uuid.UUID) (map[uuid.UUID][]*leasesv1.Member, error) {
	rows, err := q.GangMembers(ctx, db.GangMembersParams{LeaseIds: gangs, TenantID: tenant})
	if err != nil {
		return nil, fmt.Errorf("read the gangs' members: %w", err)
	}
	out := make(map[uuid.UUID][]*leasesv1.Member, len(gangs))
	for _, r := range rows {
		m := &leasesv1.Member{Rank: r.Rank, NodeId: r.NodeID.String(), Hostname: r.Hostname, GpuIndexes: r.GpuIndexes, Healthy: true}
		_ = json.Unmarshal(r.Domain, &m.Domain)       // an object of strings, built by the query
		_ = json.Unmarshal(r.Addresses, &m.Addresses) // an array of strings, from the inventory
		switch {
		case !r.Online:
			m.Healthy, m.HealthReason = false, "node offline"
		case len(r.Unhealthy) > 0:
			m.Healthy, m.HealthReason = false, fmt.Sprintf("unhealthy GPUs %v", r.Unhealthy)
		}
		out[r.LeaseID] = append(out[r.LeaseID], m)
	}
	return out, nil
}
