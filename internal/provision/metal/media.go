package metal

import (
	"fmt"

	"github.com/stmcginnis/gofish/schemas"
)

// media is the system's virtual media device of the class (boot.device).
func (p *provider) media(s system) (*schemas.VirtualMedia, error) {
	all, err := s.sys.VirtualMedia()
	if err != nil {
		return nil, fmt.Errorf("redfish: system %s: list virtual media: %w", s.sys.ODataID, err)
	}
	for _, m := range all {
		if m.ID == p.params.Boot.Device {
			return m, nil
		}
	}
	return nil, fmt.Errorf("redfish: system %s has no virtual media device %q", s.sys.ODataID, p.params.Boot.Device)
}

// readClaim reads the system's claim: the inserted media's URL fragment (virtualMedia) or its
// asset tag (pxe). free says whether the class may claim it: no claim and, for virtual media,
// nothing inserted.
func (p *provider) readClaim(s system) (claim, bool, error) {
	cl, _, err := p.readClaimFree(s)
	return cl, cl != (claim{}), err
}

func (p *provider) readClaimFree(s system) (cl claim, free bool, err error) {
	if p.params.Boot.Mode == BootPXE {
		cl, ok := parseClaim(s.sys.AssetTag)
		return cl, !ok && s.sys.AssetTag == "", nil
	}
	m, err := p.media(s)
	if err != nil {
		return claim{}, false, err
	}
	cl, ok := mediaClaim(m.Image)
	inserted := m.Inserted != nil && *m.Inserted
	return cl, !ok && !inserted && m.Image == "", nil
}

// writeClaim claims the system for cl: in virtualMedia mode by inserting image with the claim
// as its fragment, in pxe mode by setting the asset tag.
func (p *provider) writeClaim(s system, cl claim, image string) error {
	if p.params.Boot.Mode == BootPXE {
		s.sys.AssetTag = cl.String()
		if err := s.sys.Update(); err != nil {
			return fmt.Errorf("redfish: system %s: set the asset tag (the claim): %w", s.sys.ODataID, err)
		}
		return nil
	}
	m, err := p.media(s)
	if err != nil {
		return err
	}
	yes := true
	if _, err := m.InsertMedia(&schemas.VirtualMediaInsertMediaParameters{Image: image + "#" + cl.String(), Inserted: &yes, WriteProtected: &yes}); err != nil {
		return fmt.Errorf("redfish: system %s: insert media into %s: %w", s.sys.ODataID, m.ID, err)
	}
	return nil
}

// releaseClaim frees the system: ejects the media (virtualMedia) or clears the asset tag.
func (p *provider) releaseClaim(s system) error {
	if p.params.Boot.Mode == BootPXE {
		s.sys.AssetTag = ""
		if err := s.sys.Update(); err != nil {
			return fmt.Errorf("redfish: system %s: clear the asset tag (the claim): %w", s.sys.ODataID, err)
		}
		return nil
	}
	m, err := p.media(s)
	if err != nil {
		return err
	}
	if m.Image == "" && (m.Inserted == nil || !*m.Inserted) {
		return nil
	}
	if _, err := m.EjectMedia(); err != nil {
		return fmt.Errorf("redfish: system %s: eject media from %s: %w", s.sys.ODataID, m.ID, err)
	}
	return nil
}

// bootTarget is where the class's systems boot from once.
func (p *provider) bootTarget() schemas.BootSource {
	if p.params.Boot.Mode == BootPXE {
		return schemas.PxeBootSource
	}
	return schemas.CdBootSource
}
