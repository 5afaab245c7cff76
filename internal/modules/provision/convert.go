package provision

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	provisionmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1"
	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
)

func classProto(c provisiondb.ProvisionClass) (*provisionmodulev1.MachineClass, error) {
	var params map[string]any
	if err := json.Unmarshal(c.Params, &params); err != nil {
		return nil, fmt.Errorf("class %s: params: %w", c.Name, err)
	}
	st, err := structpb.NewStruct(params)
	if err != nil {
		return nil, fmt.Errorf("class %s: params: %w", c.Name, err)
	}
	return &provisionmodulev1.MachineClass{
		Name: c.Name, TenantId: c.TenantID.String(), Provider: c.Provider, Params: st,
		HasCredentials: c.Credentials != nil, CreateTime: timestamppb.New(c.CreatedAt),
	}, nil
}

func machineProto(m provisiondb.ProvisionMachine, steps []provisiondb.ListMachineStepsRow) *provisionmodulev1.Machine {
	out := &provisionmodulev1.Machine{
		Id: m.ID.String(), TenantId: m.TenantID.String(), Class: m.Class, Name: m.Name,
		State: stateProto[m.State], Reason: m.Reason, ProviderId: m.ProviderID,
		CreateTime: timestamppb.New(m.CreatedAt), UpdateTime: timestamppb.New(m.UpdatedAt),
	}
	if m.NodeID != nil {
		out.NodeId = m.NodeID.String()
	}
	for _, s := range steps {
		out.Steps = append(out.Steps, &provisionmodulev1.MachineStep{State: stateProto[s.State], Time: timestamppb.New(s.At), Detail: s.Detail})
	}
	return out
}
