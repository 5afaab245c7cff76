package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
)

// FakeVersion is the daemon version a FakeDaemon reports until an upgrade changes it.
const FakeVersion = "fake-0.1.0"

// DefaultRebootDowntime is how long a FakeDaemon stays away after a reboot unless
// FakeOptions.RebootDowntime says otherwise.
const DefaultRebootDowntime = 2 * time.Second

// Fake is a FakeDaemon: a daemon that speaks the real protocol (real key, CSR, mTLS and stream,
// through an Agent) with a configurable inventory and scripted command handlers, for tests, dev
// and the simulator. It opens tunnels exactly as bcd does (the Agent's code), to the ports of its
// allow list on the machine it runs on.
//
// It runs every command type, as bcd would but without touching the machine it runs on:
//
//   - echo returns its data, after data.sleepSeconds when set, or fails with data.fail when that
//     is a string: the tests' slow and failing commands.
//   - collectInventory returns the inventory.
//   - drain and undrain set the drain flag (Draining): {"draining": true, "since": RFC 3339} and
//     {"draining": false}. While draining, exec is refused as bcd refuses it; upgrade, reboot
//     and configure run.
//   - configure keeps the config (Config): {"sha256": of its canonical form (ConfigJSON),
//     "bytes", "changed"}, as bcd reports it (without bcd's "path").
//   - exec answers well-known programs (nvidia-smi, uname, hostname, …; SimulatedPrograms)
//     with output made from the inventory, /bin/false with exit code 1, and any other program
//     with exit code 0 and no output; every result says "simulated": true.
//   - upgrade checks the version (command.ValidateUpgrade). To the running version it succeeds
//     at once with {"version", "previousVersion"}. To another, it restarts the daemon as that
//     version, as bcd execs the new binary: the session ends, the new process says hello with
//     the new version, and only then reports the same result (Agent.Finish), as bcd's new binary
//     does once it holds a session.
//   - reboot succeeds with {"rebooting": true}; the session lasts a moment more (100ms, as a
//     host takes a moment to stop its services), long enough for the result to go out on it,
//     then the daemon goes away for RebootDowntime and comes back with a new session.
//   - gpuReset and diagnose play the outcomes SetRemedy scripts for each GPU (a reset that
//     clears the GPU's signals, or does not, or fails; a diagnose that passes, fails or finds no
//     DCGM), with bcd's results.
//
// A restart is a new Agent with the same identity, as a new process would be: a new session and
// new connections, tunnels closed. What bcd keeps on disk survives it: the version installed, the
// drain flag, the configuration and the idempotency record. So do the GPU signals
// (InjectGPUSignal), which bcd would read again from the kernel log; a reboot clears them.
// Its GPUs are sampled every FakeOptions.UsageInterval under their load profiles (SetLoad: idle
// until set) and the minutes sent as bcd sends them (gpu_usage). FakeOptions.FailRate makes a chosen
// share of upgrade, reboot, configure and exec commands fail.
type Fake struct {
	// Runs counts handler executions per command type (a re-delivered command answered from
	// the record does not count), so tests can check exactly-once execution.
	Runs map[string]*atomic.Int64

	opts     FakeOptions
	handlers map[string]Handler // the options' handlers, which replace the built-in ones
	failer   *failer
	record   *fakeRecord
	// restart is signalled when the running process asked to be restarted (plan says how).
	restart chan struct{}

	inventory atomic.Pointer[daemonv1.Inventory]
	// gpu is the GPU health every process's Agent sends (InjectGPUSignal); a reboot clears it.
	gpu fakeGPUHealth
	// usage is the GPUs' load profiles and the usage minutes every process's Agent sends.
	usage *fakeGPUUsage

	mu       sync.Mutex
	identity *Identity
	proc     *fakeProc // the running (or next) process; nil while the daemon is down
	gen      int       // generation of the last process started
	version  string    // what the current (or last) process reports
	// installed is the version the next process runs.
	installed string
	plan      *restartPlan
	// finishes are results the next process reports once it holds a session (an upgrade's).
	finishes []pendingFinish
	// reboots are the plans of reboot commands whose results are not yet reported, by id.
	reboots map[string]restartPlan
	// What the processes before the current one did.
	prevSessions int
	lastErr      error
	draining     bool
	drainedAt    time.Time
	config       []byte
	// remedies are the scripted outcomes of gpuReset and diagnose, by GPU UUID (SetRemedy).
	remedies map[string]Remedy
}

// fakeProc is one process of a FakeDaemon: an Agent of one version, which ends at a restart.
type fakeProc struct {
	agent *Agent
	gen   int
	// retired is closed once the Agent has stopped.
	retired chan struct{}
}

// restartPlan is how the daemon restarts: with which version, after how long away.
type restartPlan struct {
	// version is the version the next process runs ("" keeps the installed one).
	version string
	// grace lets the process send what it has queued before it stops (a reboot's shutdown).
	grace time.Duration
	// downtime is how long the daemon stays away; with never, it does not come back until Run
	// is called again.
	downtime time.Duration
	never    bool
	// reboot is a host reboot, not only a daemon restart: what the kernel kept (GPU signals) is
	// gone.
	reboot bool
}

// merge combines two restarts asked for at once: the later version, the longer absence.
func (p restartPlan) merge(q restartPlan) restartPlan {
	if q.version != "" {
		p.version = q.version
	}
	p.grace, p.downtime, p.never = max(p.grace, q.grace), max(p.downtime, q.downtime), p.never || q.never
	p.reboot = p.reboot || q.reboot
	return p
}

// pendingFinish is a result that a later process reports (Agent.Finish) once it holds a
// session.
type pendingFinish struct {
	afterGen int
	key      string
	result   *daemonv1.CommandResult
}

// SetInventory changes what the FakeDaemon reports from now on: in its next hello and to a
// collectInventory command. inv must not be changed afterwards.
func (f *Fake) SetInventory(inv *daemonv1.Inventory) { f.inventory.Store(inv) }

// inventoryStruct is an inventory as a command result: its JSON (protojson) form, which the
// gateway reads back as the node's inventory.
func inventoryStruct(inv *daemonv1.Inventory) (*structpb.Struct, error) {
	b, err := protojson.Marshal(inv)
	if err != nil {
		return nil, fmt.Errorf("encode inventory: %w", err)
	}
	out := &structpb.Struct{}
	if err := protojson.Unmarshal(b, out); err != nil {
		return nil, fmt.Errorf("encode inventory: %w", err)
	}
	return out, nil
}

// FakeOptions configure a FakeDaemon.
type FakeOptions struct {
	Dialer    Dialer
	Inventory *daemonv1.Inventory
	// Handlers are added to (and override) the built-in ones (see Fake); an overridden type
	// gets no injected failures.
	Handlers  map[string]Handler
	ClockSkew time.Duration
	Logger    *slog.Logger
	// TunnelPorts is the FakeDaemon's tunnel allow list (Options.TunnelPorts): it opens tunnels
	// as bcd does, to those ports of 127.0.0.1 on the machine it runs on. None by default.
	TunnelPorts []int
	// RebootDowntime is how long a reboot keeps the daemon away (DefaultRebootDowntime when
	// zero); a failed upgrade's trial takes as long.
	RebootDowntime time.Duration

	// FailRate (0 to 1) is the share of commands of FailTypes that fail, drawn from a random
	// source seeded with Seed and the daemon's hostname, so that a run replays the same way. A
	// failing upgrade is rolled back: the daemon restarts, stays away for RebootDowntime (the
	// new binary's trial), comes back with its old version and reports the upgrade failed as
	// bcd does. A failing reboot succeeds, but the daemon comes back only after ten times
	// RebootDowntime, or never with StuckReboots. A failing configure or exec fails with an
	// error (an exec as a program that exited 1). Zero by default: nothing fails.
	FailRate float64
	// FailTypes are the command types FailRate applies to: upgrade, reboot, configure and exec
	// (all four by default).
	FailTypes []string
	// Seed seeds the draws of FailRate.
	Seed uint64
	// FailNodes, when set, picks the daemons FailRate applies to, by hostname (the inventory's);
	// on the others nothing fails. With FailRate 1, exactly the daemons it names fail.
	FailNodes func(hostname string) bool
	// StuckReboots makes a failing reboot never come back (until Run is called again, as the
	// simulator's crash and restart do) instead of coming back late.
	StuckReboots bool
	// UsageInterval is how often Run samples the GPUs' usage (SetLoad, SampleUsage):
	// DefaultFakeUsageInterval when zero; negative samples nothing and sends no usage, as bcd
	// with --gpu-usage-interval 0.
	UsageInterval time.Duration
	// Now is the clock of the usage samples and their minutes; time.Now when nil.
	Now func() time.Time
}

// JoinFake joins with token and returns a FakeDaemon ready to Run. Its inventory, unless
// opts.Inventory gives one, names hostname.
func JoinFake(ctx context.Context, rootPEM []byte, token, hostname string, opts FakeOptions) (*Fake, error) {
	id, err := opts.Dialer.Join(ctx, rootPEM, token, hostname)
	if err != nil {
		return nil, err
	}
	if opts.Inventory == nil {
		inv := defaultFakeInventory()
		inv.Hostname = hostname
		opts.Inventory = inv
	}
	return NewFake(id, opts)
}

func defaultFakeInventory() *daemonv1.Inventory {
	return &daemonv1.Inventory{Hostname: "fake", Os: "linux", Kernel: "6.1.0-fake", CpuModel: "Fake CPU", Cpus: 8, MemoryBytes: 32 << 30}
}

// NewFake returns a FakeDaemon for an identity, running FakeVersion.
func NewFake(id *Identity, opts FakeOptions) (*Fake, error) {
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("fake daemon: %w", err)
	}
	if opts.RebootDowntime == 0 {
		opts.RebootDowntime = DefaultRebootDowntime
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	inv := opts.Inventory
	if inv == nil {
		inv = defaultFakeInventory()
	}
	f := &Fake{
		Runs: map[string]*atomic.Int64{}, opts: opts, handlers: opts.Handlers,
		failer: newFailer(opts, inv.GetHostname()), record: newFakeRecord(), restart: make(chan struct{}, 1),
		identity: id, version: FakeVersion, installed: FakeVersion, reboots: map[string]restartPlan{},
	}
	f.inventory.Store(inv)
	f.usage = newFakeGPUUsage(opts, inv.GetHostname())
	f.ClearGPUSignals() // the first hello is followed by "no signals"
	for typ := range f.builtins(0) {
		f.Runs[typ] = new(atomic.Int64)
	}
	for typ := range opts.Handlers {
		f.Runs[typ] = new(atomic.Int64)
	}
	// The first process is made now, so that a bad identity fails here.
	if _, err := f.boot(); err != nil {
		return nil, err
	}
	return f, nil
}

// Version is the daemon version the FakeDaemon reports in its hellos: FakeVersion until an
// upgrade succeeds.
func (f *Fake) Version() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.version
}

// Draining reports whether a drain command asked the daemon to take no new work (until an
// undrain).
func (f *Fake) Draining() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.draining
}

// Config is the configuration the last configure command applied, in its canonical form
// (ConfigJSON); nil before any.
func (f *Fake) Config() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.config
}

// Agent is the Agent of the FakeDaemon's current process, nil while it is down (restarting).
// Running it directly, instead of Run, runs that process alone: nothing restarts it.
func (f *Fake) Agent() *Agent {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.proc == nil {
		return nil
	}
	return f.proc.agent
}

// Status reports the connection state. Sessions counts the sessions of every process so far,
// so a restart shows as one more session.
func (f *Fake) Status() Status {
	f.mu.Lock()
	p, prev, lastErr, id := f.proc, f.prevSessions, f.lastErr, f.identity
	f.mu.Unlock()
	if p != nil {
		st := p.agent.Status()
		st.Sessions += prev
		return st
	}
	notAfter, _ := id.NotAfter()
	return Status{NodeID: id.NodeID, Sessions: prev, LastError: lastErr, NotAfter: notAfter}
}

// ErrFakeDown is the error of a call to a FakeDaemon that is restarting.
var ErrFakeDown = errors.New("fake daemon: down (restarting)")

// Secret fetches a secret as Agent.Secret does, through the current process.
func (f *Fake) Secret(ctx context.Context, name string) ([]byte, error) {
	a := f.Agent()
	if a == nil {
		return nil, ErrFakeDown
	}
	return a.Secret(ctx, name)
}

// Run runs the daemon until ctx ends: a process (Agent.Run) at a time, the next one starting
// when an upgrade or a reboot restarted the daemon and its downtime is over. Run may be called
// again after it returned (the simulator's restart after a crash): the daemon starts with what it
// kept, as bcd would after a crash. One Run at a time.
func (f *Fake) Run(ctx context.Context) error {
	// The GPUs are sampled while the daemon is away too, as bcd's queue fills while it has no
	// session; a process that is not running sends nothing.
	var sampling sync.WaitGroup
	defer sampling.Wait()
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	if f.opts.UsageInterval >= 0 {
		sampling.Go(func() { f.sampleUsage(sctx) })
	}
	for {
		p, err := f.boot()
		if err != nil {
			return err
		}
		plan, restarting := f.runProc(ctx, p)
		if !restarting {
			return nil
		}
		f.opts.Logger.Info("fake daemon: down", "version", plan.version, "downtime", plan.downtime, "never", plan.never, "reboot", plan.reboot)
		if plan.reboot {
			f.ClearGPUSignals()
		}
		if plan.never {
			<-ctx.Done()
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(plan.downtime):
		}
	}
}

// boot returns the current process, or starts the next one: an Agent of the installed version
// with the identity as last renewed.
func (f *Fake) boot() (*fakeProc, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.proc != nil {
		return f.proc, nil
	}
	// A restart asked for while no process ran is moot: this is the next process.
	f.plan = nil
	select {
	case <-f.restart:
	default:
	}
	gen := f.gen + 1
	p := &fakeProc{gen: gen, retired: make(chan struct{})}
	a, err := NewAgent(Options{
		Dialer: f.opts.Dialer, Identity: f.identity, Version: f.installed, Handlers: f.counted(f.builtins(gen)),
		Inventory: func(context.Context) (*daemonv1.Inventory, error) { return f.inventory.Load(), nil },
		GPUHealth: &f.gpu.feed,
		GPUUsage:  &f.usage.feed,
		OnRenew:   f.renewed,
		Record:    f.record.view(gen),
		AfterResult: func(c *daemonv1.Command, r *daemonv1.CommandResult) {
			f.afterResult(gen, c, r)
		},
		OnSession: func() { f.onSession(p) },
		ClockSkew: f.opts.ClockSkew, Logger: f.opts.Logger, TunnelPorts: f.opts.TunnelPorts,
	})
	if err != nil {
		return nil, fmt.Errorf("fake daemon: %w", err)
	}
	p.agent = a
	f.gen, f.proc, f.version = gen, p, f.installed
	return p, nil
}

// runProc runs process p until ctx ends or it asks to be restarted; it reports the restart's
// plan, or false when ctx ended.
func (f *Fake) runProc(ctx context.Context, p *fakeProc) (restartPlan, bool) {
	actx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = p.agent.Run(actx) }()
	var plan restartPlan
	select {
	case <-ctx.Done():
	case <-f.restart:
		f.mu.Lock()
		if f.plan != nil {
			plan = *f.plan
		}
		f.plan = nil
		f.mu.Unlock()
		if plan.grace > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(plan.grace):
			}
		}
	}
	cancel()
	<-done
	st := p.agent.Status()
	f.mu.Lock()
	f.prevSessions += st.Sessions
	f.lastErr = st.LastError
	f.proc = nil
	f.mu.Unlock()
	close(p.retired)
	return plan, ctx.Err() == nil
}

// askRestart asks for a restart on behalf of process gen; it reports false when gen is not the
// current process (one that was stopped meanwhile) and nothing was asked.
func (f *Fake) askRestart(gen int, plan restartPlan, finish *pendingFinish) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.proc == nil || f.proc.gen != gen {
		return false
	}
	if f.plan == nil {
		f.plan = &plan
	} else {
		merged := f.plan.merge(plan)
		f.plan = &merged
	}
	if plan.version != "" {
		f.installed = plan.version
	}
	if finish != nil {
		f.finishes = append(f.finishes, *finish)
	}
	select {
	case f.restart <- struct{}{}:
	default:
	}
	return true
}

// retired is the channel closed once process gen has stopped (closed already for an older one).
func (f *Fake) retired(gen int) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.proc != nil && f.proc.gen == gen {
		return f.proc.retired
	}
	done := make(chan struct{})
	close(done)
	return done
}

// afterResult restarts the daemon after a reboot's result was recorded and queued, as bcd
// reboots the host.
func (f *Fake) afterResult(gen int, c *daemonv1.Command, r *daemonv1.CommandResult) {
	f.mu.Lock()
	plan, ok := f.reboots[c.GetId()]
	delete(f.reboots, c.GetId())
	f.mu.Unlock()
	if ok && r.GetSuccess() {
		f.askRestart(gen, plan, nil)
	}
}

// onSession reports, once process p holds a session, the results its predecessors left to it.
func (f *Fake) onSession(p *fakeProc) {
	f.mu.Lock()
	var mine []pendingFinish
	rest := f.finishes[:0:0]
	for _, pf := range f.finishes {
		if pf.afterGen < p.gen {
			mine = append(mine, pf)
		} else {
			rest = append(rest, pf)
		}
	}
	f.finishes = rest
	f.mu.Unlock()
	for _, pf := range mine {
		p.agent.Finish(pf.key, pf.result)
	}
}

// renewed keeps the renewed identity for the next process.
func (f *Fake) renewed(id *Identity) error {
	f.mu.Lock()
	f.identity = id
	f.mu.Unlock()
	return nil
}

// counted wraps handlers (the built-in ones of a process, then the options') so they count
// their runs in Runs.
func (f *Fake) counted(builtins map[string]Handler) map[string]Handler {
	hs := map[string]Handler{}
	for k, h := range builtins {
		hs[k] = h
	}
	for k, h := range f.handlers {
		hs[k] = h
	}
	for k, h := range hs {
		n := f.Runs[k]
		hs[k] = func(ctx context.Context, c *daemonv1.Command) (*structpb.Struct, error) {
			n.Add(1)
			return h(ctx, c)
		}
	}
	return hs
}
