package metal

import (
	"context"
	"errors"
	"fmt"

	"github.com/stmcginnis/gofish/schemas"

	"github.com/better-compute/better-compute/internal/provision"
)

// Create claims a system for the machine, or finds the one an earlier Create with the same
// client token claimed, sets its boot override, and powers it on. A system already claimed for
// the machine and powered on is left running, so a repeated Create does not reboot it.
func (p *provider) Create(ctx context.Context, req provision.CreateRequest) (provision.Machine, error) {
	want := claim{Deployment: req.Tags[provision.TagDeployment], Machine: req.ClientToken}
	if want.Deployment == "" || want.Machine == "" {
		return provision.Machine{}, provision.Permanent(errors.New("redfish: a machine needs a client token and the deployment tag"))
	}
	image := ""
	if p.params.Boot.Mode == BootVirtualMedia {
		if req.Join.BootConfigURL == "" {
			return provision.Machine{}, provision.Permanent(errors.New("redfish: virtual media boot needs the machine's boot configuration URL: set the deployment's baseURL"))
		}
		image = renderImage(p.params.Boot.Image, req.Join.BootConfigURL, req.ClientToken, req.Name)
	}
	s, done, err := p.claimSystem(ctx, want, image)
	if err != nil {
		return provision.Machine{}, err
	}
	defer done()
	if err := s.sys.SetBoot(&schemas.Boot{
		BootSourceOverrideTarget: p.bootTarget(), BootSourceOverrideEnabled: schemas.OnceBootSourceOverrideEnabled,
	}); err != nil {
		return provision.Machine{}, fmt.Errorf("redfish: system %s: set the boot override: %w", s.sys.ODataID, err)
	}
	if s.sys.PowerState == schemas.OffPowerState || s.sys.PowerState == schemas.PoweringOffPowerState {
		if _, err := s.sys.Reset(schemas.OnResetType); err != nil {
			return provision.Machine{}, fmt.Errorf("redfish: system %s: power on: %w", s.sys.ODataID, err)
		}
		s.sys.PowerState = schemas.PoweringOnPowerState
	}
	return machine(s, want), nil
}

// claimSystem returns the system claimed for want, claiming a free one (powered off, without a
// claim or media) when there is none. The claim is read back after writing it: a process that
// raced this one to the same system finds its claim overwritten and fails, to be retried.
func (p *provider) claimSystem(ctx context.Context, want claim, image string) (system, func(), error) {
	claimMu.Lock()
	defer claimMu.Unlock()
	all, done, err := p.systems(ctx)
	if err != nil {
		return system{}, nil, err
	}
	var free *system
	for i, s := range all {
		cl, isFree, err := p.readClaimFree(s)
		if err != nil {
			done()
			return system{}, nil, err
		}
		if cl == want {
			return s, done, nil
		}
		if free == nil && isFree && s.sys.PowerState == schemas.OffPowerState {
			free = &all[i]
		}
	}
	if free == nil {
		done()
		return system{}, nil, fmt.Errorf("redfish: none of the class's %d systems is free (powered off, unclaimed, without media)", len(all))
	}
	if err := p.writeClaim(*free, want, image); err != nil {
		done()
		return system{}, nil, err
	}
	sys, err := schemas.GetComputerSystem(free.c, free.sys.ODataID)
	if err != nil {
		done()
		return system{}, nil, fmt.Errorf("redfish: read system %s back: %w", free.sys.ODataID, err)
	}
	s := system{endpoint: free.endpoint, c: free.c, sys: sys}
	cl, _, err := p.readClaimFree(s)
	if err != nil {
		done()
		return system{}, nil, fmt.Errorf("redfish: read system %s's claim back: %w", sys.ODataID, err)
	}
	if cl != want {
		done()
		return system{}, nil, fmt.Errorf("redfish: system %s was claimed by another process meanwhile (%s)", sys.ODataID, cl)
	}
	return s, done, nil
}

// Get returns the claimed system's state; a system no longer claimed by the machine is not
// found.
func (p *provider) Get(ctx context.Context, providerID string) (provision.Machine, error) {
	s, cl, done, err := p.lookup(ctx, providerID)
	if err != nil {
		return provision.Machine{}, err
	}
	defer done()
	return machine(s, cl), nil
}

// Power turns the system on (On), off (ForceOff) or resets it (ForceRestart).
func (p *provider) Power(ctx context.Context, providerID string, action provision.PowerAction) error {
	var rt schemas.ResetType
	switch action {
	case provision.PowerOn:
		rt = schemas.OnResetType
	case provision.PowerOff:
		rt = schemas.ForceOffResetType
	case provision.PowerReset:
		rt = schemas.ForceRestartResetType
	default:
		return provision.Permanent(fmt.Errorf("redfish: unknown power action %q", action))
	}
	s, _, done, err := p.lookup(ctx, providerID)
	if err != nil {
		return err
	}
	defer done()
	if _, err := s.sys.Reset(rt); err != nil {
		return fmt.Errorf("redfish: system %s: %s: %w", s.sys.ODataID, rt, err)
	}
	return nil
}

// Delete powers the system off, clears its boot override and releases the claim (ejecting the
// media), in that order, so an interrupted Delete leaves the claim for the next to finish. A
// system that is no longer the machine's is gone already.
func (p *provider) Delete(ctx context.Context, providerID string) error {
	s, _, done, err := p.lookup(ctx, providerID)
	if errors.Is(err, provision.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer done()
	if s.sys.PowerState != schemas.OffPowerState {
		if _, err := s.sys.Reset(schemas.ForceOffResetType); err != nil {
			return fmt.Errorf("redfish: system %s: power off: %w", s.sys.ODataID, err)
		}
	}
	if err := s.sys.SetBoot(&schemas.Boot{
		BootSourceOverrideTarget: schemas.NoneBootSource, BootSourceOverrideEnabled: schemas.DisabledBootSourceOverrideEnabled,
	}); err != nil {
		return fmt.Errorf("redfish: system %s: clear the boot override: %w", s.sys.ODataID, err)
	}
	return p.releaseClaim(s)
}

// List lists the class's systems that carry a claim, each tagged with the machine and the
// deployment that claimed it.
func (p *provider) List(ctx context.Context) ([]provision.Machine, error) {
	all, done, err := p.systems(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	var out []provision.Machine
	for _, s := range all {
		cl, ok, err := p.readClaim(s)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, machine(s, cl))
		}
	}
	return out, nil
}
