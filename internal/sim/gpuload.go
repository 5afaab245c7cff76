package sim

import (
	"fmt"
	"math/rand/v2"

	"github.com/better-compute/better-compute/internal/daemon"
)

// assignLoads gives each GPU of the machine's daemon a load profile drawn from the fleet's seed
// and the machine's index (daemon.RandomLoad: mostly busy, some idle, some bursty), so that a
// fleet of one seed shows the same utilisation every run.
func (m *machine) assignLoads(fake *daemon.Fake) {
	r := rand.New(rand.NewPCG(m.f.opts.Seed, uint64(m.index)<<32|0x10ad))
	for _, g := range m.inv.GetGpus() {
		// The GPU is the inventory's: SetLoad cannot refuse it.
		_ = fake.SetLoad(g.GetUuid(), daemon.RandomLoad(r))
	}
}

// GPULoad is one GPU's load profile on a machine.
type GPULoad struct {
	Index   int    `json:"index"`
	UUID    string `json:"uuid"`
	Profile string `json:"profile"`
}

// SetGPULoad makes GPU gpuIndex of machine hostname (every GPU of it when gpuIndex is negative)
// run under profile (idle, busy, bursty) from its next sample on: the minutes its daemon sends
// show it. A crash and restart of the daemon keeps it.
func (f *Fleet) SetGPULoad(hostname string, gpuIndex int, profile string) error {
	m, fake, err := f.fakeOf(hostname)
	if err != nil {
		return err
	}
	p, err := daemon.ParseLoadProfile(profile)
	if err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	if gpuIndex < 0 {
		for _, g := range m.inv.GetGpus() {
			if err := fake.SetLoad(g.GetUuid(), p); err != nil {
				return fmt.Errorf("sim: %s: %w", hostname, err)
			}
		}
		return nil
	}
	g, err := m.gpu(gpuIndex)
	if err != nil {
		return err
	}
	if err := fake.SetLoad(g.GetUuid(), p); err != nil {
		return fmt.Errorf("sim: %s: %w", hostname, err)
	}
	return nil
}

// GPULoads are the load profiles of machine hostname's GPUs, by index.
func (f *Fleet) GPULoads(hostname string) ([]GPULoad, error) {
	m, fake, err := f.fakeOf(hostname)
	if err != nil {
		return nil, err
	}
	out := []GPULoad{}
	for _, g := range m.inv.GetGpus() {
		out = append(out, GPULoad{Index: int(g.GetIndex()), UUID: g.GetUuid(), Profile: string(fake.Load(g.GetUuid()))})
	}
	return out, nil
}
