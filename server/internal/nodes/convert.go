package nodes

import (
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	nodesv1 "github.com/better-compute/better-compute/gen/go/bettercompute/nodes/v1"
	"github.com/better-compute/better-compute/internal/fleet"
)

func optionalTime(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

// nodeToProto describes a node row joined with its session; the inventory only when asked.
func nodeToProto(n db.ListNodesRow, withInventory bool) (*nodesv1.Node, error) {
	labels, err := fleet.DecodeLabels(n.Labels)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.ID, err)
	}
	out := &nodesv1.Node{
		Id: n.ID.String(), TenantId: n.TenantID.String(), Hostname: n.Hostname, Pool: n.Pool,
		Labels: labels, State: string(n.State), DaemonVersion: n.DaemonVersion,
		LastSeenTime: optionalTime(n.LastSeenAt), CertExpireTime: optionalTime(n.CertNotAfter),
		Revoked: n.RevokedAt != nil, RevokeTime: optionalTime(n.RevokedAt),
		CreateTime: timestamppb.New(n.CreatedAt), UpdateTime: timestamppb.New(n.UpdatedAt),
	}
	if n.JoinTokenID != nil {
		out.JoinTokenId = *n.JoinTokenID
	}
	if n.SessionGateway != nil {
		out.Connected = true
		out.GatewayId = *n.SessionGateway
		out.ConnectTime = optionalTime(n.SessionConnectedAt)
		if n.SessionTransport != nil {
			out.Transport = *n.SessionTransport
		}
	}
	out.Online = n.Online
	out.OnlineChangeTime = optionalTime(n.OnlineChangedAt)
	out.StateChangeTime = optionalTime(n.StateChangedAt)
	out.SpecGeneration, out.ObservedGeneration = n.SpecGeneration, n.ObservedGeneration
	taints, err := fleet.DecodeTaints(n.Taints)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.ID, err)
	}
	out.Taints = taintsToProto(taints)
	spec, err := fleet.DecodeSpec(n.Spec)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.ID, err)
	}
	if out.Spec, err = specToProto(spec); err != nil {
		return nil, fmt.Errorf("node %s: %w", n.ID, err)
	}
	conditions, err := fleet.DecodeConditions(n.Conditions)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.ID, err)
	}
	for _, c := range conditions {
		out.Conditions = append(out.Conditions, &nodesv1.Condition{
			Type: c.Type, Status: c.Status, Reason: c.Reason, Message: c.Message,
			LastTransitionTime: timestamppb.New(c.LastTransitionTime), ObservedGeneration: c.ObservedGeneration,
		})
	}
	if withInventory {
		if out.Inventory, err = decodeInventory(n.Inventory); err != nil {
			return nil, fmt.Errorf("node %s: %w", n.ID, err)
		}
	}
	return out, nil
}

// reducedNode is what a tenant sees of another tenant's node its leases hold (nodes/get): its
// id, hostname, state, whether it is online and connected, and of its inventory only the GPUs,
// CPUs and memory; nothing else of the owner's (labels, spec, taints, pool, join token, gateway,
// certificate, conditions, tenant).
func reducedNode(n db.GetLeasedNodeRow) (*nodesv1.Node, error) {
	out := &nodesv1.Node{
		Id: n.ID.String(), Hostname: n.Hostname, State: string(n.State), Online: n.Online,
		Connected: n.SessionGateway != nil, Reduced: true,
	}
	inv, err := decodeInventory(n.Inventory)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.ID, err)
	}
	if inv != nil {
		out.Inventory = &nodesv1.Inventory{Gpus: inv.GetGpus(), Cpus: inv.GetCpus(), MemoryBytes: inv.GetMemoryBytes()}
	}
	return out, nil
}

// decodeInventory reads nodes.inventory, which the gateway writes as the protojson of the
// daemon's bettercompute.daemon.v1.Inventory. Fields a newer daemon adds are ignored; an empty
// inventory (before the first hello) is nil.
func decodeInventory(b []byte) (*nodesv1.Inventory, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var inv daemonv1.Inventory
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, &inv); err != nil {
		return nil, fmt.Errorf("decode inventory: %w", err)
	}
	if proto.Size(&inv) == 0 {
		return nil, nil
	}
	return inventoryToProto(&inv), nil
}

func inventoryToProto(inv *daemonv1.Inventory) *nodesv1.Inventory {
	out := &nodesv1.Inventory{
		Hostname: inv.GetHostname(), Os: inv.GetOs(), Kernel: inv.GetKernel(), CpuModel: inv.GetCpuModel(),
		Cpus: inv.GetCpus(), MemoryBytes: inv.GetMemoryBytes(), GpuProbeError: inv.GetGpuProbeError(),
	}
	for _, g := range inv.GetGpus() {
		out.Gpus = append(out.Gpus, gpuToProto(g))
	}
	if d := inv.GetGpuDriver(); d != nil {
		out.GpuDriver = &nodesv1.GpuDriver{
			DriverVersion: d.GetDriverVersion(), CudaVersion: d.GetCudaVersion(),
			FabricManagerState: d.GetFabricManagerState(), FabricManagerStatus: d.GetFabricManagerStatus(),
		}
	}
	for _, d := range inv.GetDisks() {
		out.Disks = append(out.Disks, &nodesv1.Disk{Name: d.GetName(), SizeBytes: d.GetSizeBytes(), Model: d.GetModel()})
	}
	for _, n := range inv.GetNics() {
		out.Nics = append(out.Nics, &nodesv1.Nic{Name: n.GetName(), Mac: n.GetMac(), SpeedMbps: n.GetSpeedMbps(), Addresses: n.GetAddresses()})
	}
	return out
}

// gpuToProto is the API's view of one GPU the daemon reported, field for field.
func gpuToProto(g *daemonv1.Gpu) *nodesv1.Gpu {
	out := &nodesv1.Gpu{
		Index: g.GetIndex(), Model: g.GetModel(), MemoryBytes: g.GetMemoryBytes(), Uuid: g.GetUuid(),
		Serial: g.GetSerial(), PciBusId: g.GetPciBusId(), NumaNode: copyInt32(g.NumaNode), VbiosVersion: g.GetVbiosVersion(),
		MigMode: g.GetMigMode(), PowerLimitWatts: g.GetPowerLimitWatts(), PersistenceMode: g.GetPersistenceMode(),
		MinorNumber: g.GetMinorNumber(), NearNics: slices.Clone(g.GetNearNics()),
	}
	for _, l := range g.GetLinks() {
		out.Links = append(out.Links, &nodesv1.GpuLink{PeerIndex: l.GetPeerIndex(), PeerUuid: l.GetPeerUuid(), Path: l.GetPath(), Nvlinks: l.GetNvlinks()})
	}
	return out
}

// copyInt32 copies an optional field's value, so the API's message shares nothing with the
// decoded inventory.
func copyInt32(p *int32) *int32 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
