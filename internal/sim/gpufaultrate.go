package sim

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/better-compute/better-compute/internal/gpuhealth"
)

// GPUFault is one GPU fault that Options.GPUFaultRate injects.
type GPUFault struct {
	// At is when, counted from the end of the join phase.
	At       time.Duration
	Hostname string
	// GPU is the GPU's nvidia-smi index on that machine.
	GPU   int
	Check string
	Code  int64
	// For is how long a passing condition (a thermal slowdown) lasts before the machine stops
	// reporting it; zero for a signal that stays until cleared or rebooted.
	For time.Duration
}

// gpuFaultKind is one entry of the mix of faults GPUFaultRate draws from.
type gpuFaultKind struct {
	check string
	code  int64
	// lasts, when set, is the range of how long the condition lasts.
	lasts [2]time.Duration
}

// gpuFaultMix is what a fleet's GPUs suffer, roughly as a fleet's kernel logs show it: mostly
// application Xids (13, 31, 43), which the default policy ignores, then uncontained and
// contained ECC errors (95, 94), double-bit ECC (48), a GPU fallen off the bus (79), rows
// waiting for a remap, and thermal slowdowns that pass after minutes.
var gpuFaultMix = []weighted[gpuFaultKind]{
	{gpuFaultKind{check: gpuhealth.CheckXid, code: 13}, 25},
	{gpuFaultKind{check: gpuhealth.CheckXid, code: 31}, 20},
	{gpuFaultKind{check: gpuhealth.CheckXid, code: 43}, 15},
	{gpuFaultKind{check: gpuhealth.CheckXid, code: 79}, 5},
	{gpuFaultKind{check: gpuhealth.CheckXid, code: 48}, 5},
	{gpuFaultKind{check: gpuhealth.CheckXid, code: 94}, 6},
	{gpuFaultKind{check: gpuhealth.CheckXid, code: 95}, 4},
	{gpuFaultKind{check: gpuhealth.CheckRowRemapPending}, 10},
	{gpuFaultKind{check: gpuhealth.CheckThermalSlowdown, lasts: [2]time.Duration{2 * time.Minute, 10 * time.Minute}}, 10},
}

// validGPUFaultRate checks Options.GPUFaultRate.
func validGPUFaultRate(rate float64) error {
	if !(rate >= 0) || math.IsInf(rate, 1) {
		return errors.New("sim: the GPU fault rate must be a finite number, 0 or more")
	}
	return nil
}

// gpuRef is one GPU of the fleet.
type gpuRef struct {
	m   *machine
	gpu int
}

// gpuFaultPlan draws the faults of GPUFaultRate: a Poisson process over the fleet's GPUs, each
// fault on a GPU drawn uniformly, of a kind drawn from gpuFaultMix. It depends on the seed, the
// fleet's inventories and the rate only, so the same seed replays the same faults.
type gpuFaultPlan struct {
	r    *rand.Rand
	gpus []gpuRef
	// perSecond is the fleet's faults per second.
	perSecond float64
	at        time.Duration
}

func (f *Fleet) newGPUFaultPlan() *gpuFaultPlan {
	p := &gpuFaultPlan{r: rand.New(rand.NewPCG(f.opts.Seed, uint64(2)<<32))}
	for _, m := range f.machines {
		for _, g := range m.inv.GetGpus() {
			p.gpus = append(p.gpus, gpuRef{m: m, gpu: int(g.GetIndex())})
		}
	}
	p.perSecond = f.opts.GPUFaultRate * float64(len(p.gpus)) / time.Hour.Seconds()
	return p
}

// next is the next fault; false when there are none (no GPUs, or a zero rate).
func (p *gpuFaultPlan) next() (GPUFault, bool) {
	if p.perSecond <= 0 || len(p.gpus) == 0 {
		return GPUFault{}, false
	}
	p.at += time.Duration(p.r.ExpFloat64() / p.perSecond * float64(time.Second))
	g := p.gpus[p.r.IntN(len(p.gpus))]
	k := pick(p.r, gpuFaultMix)
	fault := GPUFault{At: p.at, Hostname: g.m.hostname, GPU: g.gpu, Check: k.check, Code: k.code}
	if k.lasts[1] > 0 {
		fault.For = k.lasts[0] + time.Duration(p.r.Int64N(int64(k.lasts[1]-k.lasts[0])))
	}
	return fault, true
}

// GPUFaultPlan is the faults Options.GPUFaultRate injects within d of the end of the join
// phase, in order: what a run will do, drawn from the seed before it happens.
func (f *Fleet) GPUFaultPlan(d time.Duration) []GPUFault {
	var out []GPUFault
	p := f.newGPUFaultPlan()
	for {
		fault, ok := p.next()
		if !ok || fault.At > d {
			return out
		}
		out = append(out, fault)
	}
}

// injectGPUFaults injects the plan's faults at their times until ctx ends. A fault of a machine
// whose daemon never started (its join failed) is skipped.
func (f *Fleet) injectGPUFaults(ctx context.Context) {
	p := f.newGPUFaultPlan()
	start := time.Now()
	var resolving sync.WaitGroup
	defer resolving.Wait()
	for {
		fault, ok := p.next()
		if !ok || !sleep(ctx, time.Until(start.Add(fault.At))) {
			return
		}
		if err := f.InjectGPU(fault.Hostname, fault.GPU, fault.Check, fault.Code, 1, ""); err != nil {
			f.log.Debug("GPU fault not injected", "host", fault.Hostname, "err", err)
			continue
		}
		f.log.Info("injected GPU fault", "host", fault.Hostname, "gpu", fault.GPU, "check", fault.Check, "code", fault.Code, "for", fault.For)
		if fault.For > 0 {
			resolving.Go(func() { f.resolveGPUFault(ctx, fault) })
		}
	}
}

// resolveGPUFault stops reporting a passing condition once it is over.
func (f *Fleet) resolveGPUFault(ctx context.Context, fault GPUFault) {
	if !sleep(ctx, fault.For) {
		return
	}
	m, fake, err := f.fakeOf(fault.Hostname)
	if err != nil {
		return
	}
	if g, err := m.gpu(fault.GPU); err == nil {
		fake.ResolveGPUSignal(g.GetUuid(), fault.Check, fault.Code)
	}
}
