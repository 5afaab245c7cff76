package provision

import (
	provisionmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1"
)

// The machine states, as the database stores them (provision_machines.state).
const (
	StateRequested    = "requested"
	StateProvisioning = "provisioning"
	StateBooting      = "booting"
	StateJoined       = "joined"
	StateReady        = "ready"
	StateDeleting     = "deleting"
	StateDraining     = "draining"
	StateDestroying   = "destroying"
	StateGone         = "gone"
	StateFailed       = "failed"
)

var stateProto = map[string]provisionmodulev1.MachineState{
	StateRequested:    provisionmodulev1.MachineState_MACHINE_STATE_REQUESTED,
	StateProvisioning: provisionmodulev1.MachineState_MACHINE_STATE_PROVISIONING,
	StateBooting:      provisionmodulev1.MachineState_MACHINE_STATE_BOOTING,
	StateJoined:       provisionmodulev1.MachineState_MACHINE_STATE_JOINED,
	StateReady:        provisionmodulev1.MachineState_MACHINE_STATE_READY,
	StateDeleting:     provisionmodulev1.MachineState_MACHINE_STATE_DELETING,
	StateDraining:     provisionmodulev1.MachineState_MACHINE_STATE_DRAINING,
	StateDestroying:   provisionmodulev1.MachineState_MACHINE_STATE_DESTROYING,
	StateGone:         provisionmodulev1.MachineState_MACHINE_STATE_GONE,
	StateFailed:       provisionmodulev1.MachineState_MACHINE_STATE_FAILED,
}

// deletable are the states DeleteMachine moves to deleting; the others are deleting already or
// further on.
var deletable = []string{StateRequested, StateProvisioning, StateBooting, StateJoined, StateReady, StateFailed}

// atProvider are the states in which the provider holds the machine and can power it.
var atProvider = []string{StateBooting, StateJoined, StateReady}
