package event

import (
	"time"

	"github.com/google/uuid"
)

// MachineOrphan is the payload of the provision module's orphan sweep about one resource that a
// machine class's provider holds for this deployment (tagged with it) and that no machine names:
// its machine tag names no machine, or one that is gone.
type MachineOrphan struct {
	// ID is the machine id the resource's machine tag names; the nil UUID when the tag is not a
	// machine id.
	ID uuid.UUID `json:"id"`
	// Class is the machine class whose provider lists the resource.
	Class string `json:"class"`
	// Provider is the class's provider kind.
	Provider string `json:"provider"`
	// ProviderID is the resource's id at the provider.
	ProviderID string `json:"providerId"`
	// MachineTag is the resource's machine tag as found (cut to 256 characters).
	MachineTag string `json:"machineTag"`
	// FirstSeen is when the sweep first found the resource without a machine.
	FirstSeen time.Time `json:"firstSeen"`
}

// Subject is "machine/<id>".
func (e MachineOrphan) Subject() string { return "machine/" + e.ID.String() }

// MachineOrphanFound is emitted when the orphan sweep first finds a resource without a machine
// (once per resource, not at every sweep), whether or not it removes orphans.
type MachineOrphanFound struct{ MachineOrphan }

// Type is "machine.orphan_found".
func (MachineOrphanFound) Type() string { return "machine.orphan_found" }

// MachineOrphanRemoved is emitted when the provider deleted an orphan the sweep asked it to
// delete (modules.provision.orphans.remove, once the orphan is older than orphans.minAge).
type MachineOrphanRemoved struct{ MachineOrphan }

// Type is "machine.orphan_removed".
func (MachineOrphanRemoved) Type() string { return "machine.orphan_removed" }
