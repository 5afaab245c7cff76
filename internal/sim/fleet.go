package sim

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon"
)

// Options configure a fleet.
type Options struct {
	// Gateway is the gateways' "host:port" (an L4 balancer in front of them, or one gateway).
	Gateway string
	// ServerName overrides the name gateway certificates are checked against.
	ServerName string
	// Transport is how the machines reach the gateways (daemon.Dialer.Transport): directly
	// (h2, the default), inside WebSockets, or directly with a fallback to them (auto).
	Transport daemon.Transport
	// WebSocketURL is the gateways' WebSocket listener (daemon.Dialer.WebSocketURL), for the
	// websocket and auto transports. Its outer TLS is verified against RootPEM.
	WebSocketURL string
	// RootPEM is the PKI root CA that gateways' certificates chain to.
	RootPEM []byte
	// Token is a join token with a use for every machine that joins.
	Token string
	// N is the number of machines.
	N int
	// Seed makes the inventories and the faults' choices of machines; the same seed gives the same
	// fleet.
	Seed uint64
	// Prefix names the machines "<prefix>-0001" and up; "sim" by default.
	Prefix string
	// JoinConcurrency bounds the joins in flight (32 by default).
	JoinConcurrency int
	Scenario        Scenario
	// Handlers add to (and override) the FakeDaemon's command handlers (see daemon.Fake).
	Handlers map[string]daemon.Handler
	// FailRate (0 to 1) is the share of the machines' upgrade, reboot, configure and exec
	// commands (FailTypes, when set) that fail, each machine drawing from Seed and its hostname
	// (daemon.FakeOptions.FailRate). Zero by default.
	FailRate  float64
	FailTypes []string
	// RebootDowntime is how long a reboot keeps a machine away (daemon.DefaultRebootDowntime
	// when zero); a failed reboot keeps it away ten times as long, or for good with
	// StuckReboots (until a crash fault restarts it).
	RebootDowntime time.Duration
	StuckReboots   bool
	// GPUFaultRate is the expected share of the fleet's GPUs that get a fault per hour (0.01:
	// one GPU in a hundred each hour; above 1, some GPUs more than once), injected as InjectGPU
	// does from the end of the join phase. The faults, their times, GPUs and kinds are drawn
	// from Seed (GPUFaultPlan lists them): mostly application Xids (13, 31, 43), some Xid 79,
	// 48, 94 and 95, pending row remaps and passing thermal slowdowns. Zero by default.
	GPUFaultRate float64
	// GPUUsageInterval is how often the machines sample their GPUs' usage (daemon.FakeOptions.
	// UsageInterval): the daemons' default when zero, none at all when negative.
	GPUUsageInterval time.Duration
	// TunnelPorts is every machine's tunnel allow list (daemon.FakeOptions.TunnelPorts): the
	// FakeDaemons open tunnels to these ports of 127.0.0.1 on the machine the simulator runs on.
	// None by default.
	TunnelPorts []int
	// TunnelRTT, when positive, adds this round trip to the machines' tunnel data plane (half
	// each way, see DelayConn), so tunnel benchmarks measure at a real network's latency; the
	// sessions are left alone.
	TunnelRTT time.Duration
	// StateDir, when set, keeps each machine's identity (key and certificate), so a fleet
	// restarted with the same directory reconnects as the same nodes instead of joining new ones.
	StateDir string
	// Logger receives the fleet's own events (join errors, injected faults); AgentLogger the
	// daemons' (discarded by default: thousands of daemons log a lot).
	Logger      *slog.Logger
	AgentLogger *slog.Logger
}

// faultsWaitConnected bounds how long the scenario's faults wait for the joined machines to hold
// their sessions before they start all the same.
const faultsWaitConnected = 30 * time.Second

// DefaultJoinConcurrency bounds the joins in flight when Options does not.
const DefaultJoinConcurrency = 32

// maxJoinErrors is how many join errors a fleet keeps to report.
const maxJoinErrors = 5

// Fleet is N simulated machines: FakeDaemons that join with a token and hold sessions with real
// keys, certificates and TLS connections, suffering the faults of a scenario.
type Fleet struct {
	opts     Options
	log      *slog.Logger
	agentLog *slog.Logger
	roots    *x509.CertPool
	dialer   net.Dialer
	machines []*machine
	byHost   map[string]*machine

	started  atomic.Bool
	ctx      context.Context // Run's, for restarts
	joinDone chan struct{}

	mu         sync.Mutex
	joinStart  time.Time
	joinEnd    time.Time
	joinErrors []error

	joins, reused, failed, retries atomic.Int64
	disconnects, crashes           atomic.Int64
	gpuSignals                     atomic.Int64 // InjectGPU's signals (Stats.GPUSignals)
	injecting                      atomic.Int64 // scenario faults not yet over (Stats.Injecting)
}

// New prepares a fleet; Run runs it.
func New(opts Options) (*Fleet, error) {
	switch {
	case opts.N <= 0:
		return nil, errors.New("sim: N must be positive")
	case opts.Gateway == "":
		return nil, errors.New("sim: no gateway address")
	case len(opts.RootPEM) == 0:
		return nil, errors.New("sim: no root CA")
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(opts.RootPEM) {
		return nil, errors.New("sim: the root CA holds no PEM certificate")
	}
	if err := opts.Scenario.Validate(); err != nil {
		return nil, err
	}
	if err := (daemon.FakeOptions{
		TunnelPorts: opts.TunnelPorts, FailRate: opts.FailRate, FailTypes: opts.FailTypes, RebootDowntime: opts.RebootDowntime,
	}).Validate(); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if _, err := daemon.ParseTransport(string(opts.Transport)); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if err := validGPUFaultRate(opts.GPUFaultRate); err != nil {
		return nil, err
	}
	if opts.TunnelRTT < 0 {
		return nil, errors.New("sim: the tunnel round trip must not be negative")
	}
	if opts.Prefix == "" {
		opts.Prefix = "sim"
	}
	if opts.JoinConcurrency <= 0 {
		opts.JoinConcurrency = DefaultJoinConcurrency
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.AgentLogger == nil {
		opts.AgentLogger = slog.New(slog.DiscardHandler)
	}
	f := &Fleet{
		opts: opts, log: opts.Logger, agentLog: opts.AgentLogger, roots: roots,
		dialer:   net.Dialer{Timeout: 10 * time.Second},
		joinDone: make(chan struct{}),
	}
	f.machines = make([]*machine, opts.N)
	f.byHost = make(map[string]*machine, opts.N)
	for i := range f.machines {
		f.machines[i] = &machine{f: f, index: i, hostname: Hostname(opts.Prefix, i), inv: Inventory(opts.Seed, i, opts.Prefix)}
		f.byHost[f.machines[i].hostname] = f.machines[i]
	}
	// Clock skew is a property of the machine from its first hello.
	for i, fault := range opts.Scenario.Faults {
		if fault.Kind == FaultSkew {
			for _, m := range f.choose(f.faultRand(i), fault.machines(opts.N), false) {
				m.skew = fault.Skew
			}
			continue
		}
		f.injecting.Add(1)
	}
	return f, nil
}

// Run joins the machines that have no identity yet (at most JoinConcurrency at once), runs every
// machine's daemon and the scenario's faults until ctx ends, then stops the daemons and returns.
// A fleet runs once.
func (f *Fleet) Run(ctx context.Context) error {
	if !f.started.CompareAndSwap(false, true) {
		return errors.New("sim: the fleet has already run")
	}
	f.ctx = ctx
	defer f.stopAll()
	f.joinAll(ctx)
	if len(f.opts.Scenario.Faults) > 0 {
		// A fault's after counts from when the joined machines hold their sessions: a disconnect
		// aimed at a machine still opening its session would find nothing to break.
		wctx, cancel := context.WithTimeout(ctx, faultsWaitConnected)
		_, _ = f.WaitConnected(wctx)
		cancel()
	}
	var wg sync.WaitGroup
	for i, fault := range f.opts.Scenario.Faults {
		if fault.Kind != FaultSkew {
			wg.Go(func() {
				defer f.injecting.Add(-1)
				f.inject(ctx, i, fault)
			})
		}
	}
	if f.opts.GPUFaultRate > 0 {
		wg.Go(func() { f.injectGPUFaults(ctx) })
	}
	<-ctx.Done()
	wg.Wait()
	return nil
}

func (f *Fleet) joinAll(ctx context.Context) {
	defer close(f.joinDone)
	f.mu.Lock()
	f.joinStart = time.Now()
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.joinEnd = time.Now()
		f.mu.Unlock()
	}()
	sem := make(chan struct{}, f.opts.JoinConcurrency)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, m := range f.machines {
		select {
		case <-ctx.Done():
			return
		case sem <- struct{}{}:
		}
		wg.Go(func() {
			defer func() { <-sem }()
			err := f.join(ctx, m)
			if err == nil {
				err = m.start(ctx)
			}
			if err != nil && ctx.Err() == nil {
				f.failed.Add(1)
				f.mu.Lock()
				if len(f.joinErrors) < maxJoinErrors {
					f.joinErrors = append(f.joinErrors, fmt.Errorf("%s: %w", m.hostname, err))
				}
				f.mu.Unlock()
				f.log.Warn("simulated machine did not join", "host", m.hostname, "err", err)
			}
		})
	}
}

// join gives m an identity: its stored one, or a fresh join (retried on transient errors).
func (f *Fleet) join(ctx context.Context, m *machine) error {
	if f.opts.StateDir != "" {
		id, err := loadIdentity(f.opts.StateDir, m.hostname, f.opts.RootPEM)
		if err != nil {
			return err
		}
		if id != nil {
			m.setIdentity(id)
			f.reused.Add(1)
			return nil
		}
	}
	for attempt := 1; ; attempt++ {
		id, err := m.dialerFor().Join(ctx, f.opts.RootPEM, f.opts.Token, m.hostname)
		if err == nil {
			m.setIdentity(id)
			f.joins.Add(1)
			if f.opts.StateDir != "" {
				return saveIdentity(f.opts.StateDir, m.hostname, id)
			}
			return nil
		}
		switch connect.CodeOf(err) {
		case connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeResourceExhausted:
		default:
			return err
		}
		if attempt == 3 || !sleep(ctx, time.Duration(attempt)*250*time.Millisecond) {
			return err
		}
		f.retries.Add(1)
	}
}

// stopAll stops every daemon at once and waits for them.
func (f *Fleet) stopAll() {
	var dones []chan struct{}
	for _, m := range f.machines {
		m.mu.Lock()
		if m.stop != nil {
			m.stop()
			dones = append(dones, m.done)
		}
		m.mu.Unlock()
		m.disconnect()
	}
	for _, d := range dones {
		<-d
	}
}

// JoinDone is closed when the join phase is over (every machine joined or failed).
func (f *Fleet) JoinDone() <-chan struct{} { return f.joinDone }

// JoinErrors are the first few join errors.
func (f *Fleet) JoinErrors() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.joinErrors)
}

// Stats is the fleet at a moment.
type Stats struct {
	Machines int
	// Joining is true during the join phase.
	Joining bool
	// Joins counts fresh joins; Reused, identities taken from the state directory; JoinErrors,
	// machines that could not join; JoinRetries, joins retried after a transient error.
	Joins, Reused, JoinErrors, JoinRetries int
	// JoinElapsed is the length of the join phase (so far).
	JoinElapsed time.Duration
	// Connected machines hold a session; Down ones are crashed and not yet restarted.
	Connected, Down int
	// Sessions opened in all, and Reconnects: sessions beyond each machine's first.
	Sessions, Reconnects int
	// Commands run by the daemons' handlers.
	Commands int64
	// Disconnects and Crashes injected.
	Disconnects, Crashes int64
	// GPUSignals injected (InjectGPU, GPUFaultRate).
	GPUSignals int64
	// Injecting is the scenario's faults not yet over: counted from New, each ends after its last
	// injection (a crash once its machine restarts; latency without for at once; flap without for
	// never). Zero means nothing more will be injected.
	Injecting int64
}

// Joined is the machines that have an identity.
func (s Stats) Joined() int { return s.Joins + s.Reused }

// JoinRate is fresh joins per second over the join phase.
func (s Stats) JoinRate() float64 {
	if s.JoinElapsed <= 0 {
		return 0
	}
	return float64(s.Joins) / s.JoinElapsed.Seconds()
}

// Stats reports the fleet now.
func (f *Fleet) Stats() Stats {
	s := Stats{
		Machines: len(f.machines), Joins: int(f.joins.Load()), Reused: int(f.reused.Load()),
		JoinErrors: int(f.failed.Load()), JoinRetries: int(f.retries.Load()),
		Disconnects: f.disconnects.Load(), Crashes: f.crashes.Load(), GPUSignals: f.gpuSignals.Load(), Injecting: f.injecting.Load(),
	}
	f.mu.Lock()
	switch {
	case f.joinStart.IsZero():
	case f.joinEnd.IsZero():
		s.Joining, s.JoinElapsed = true, time.Since(f.joinStart)
	default:
		s.JoinElapsed = f.joinEnd.Sub(f.joinStart)
	}
	f.mu.Unlock()
	for _, m := range f.machines {
		st := m.status()
		if st.Crashed {
			s.Down++
		}
		if st.Connected {
			s.Connected++
		}
		s.Sessions += st.Sessions
		s.Reconnects += max(st.Sessions-1, 0)
		s.Commands += st.Commands
	}
	return s
}

// WaitConnected waits for the join phase to end and every joined machine to hold a session.
func (f *Fleet) WaitConnected(ctx context.Context) (Stats, error) {
	select {
	case <-ctx.Done():
		return f.Stats(), ctx.Err()
	case <-f.joinDone:
	}
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		s := f.Stats()
		if s.Connected >= s.Joined() {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-t.C:
		}
	}
}

// MachineStatus is one machine now.
type MachineStatus struct {
	Hostname string
	NodeID   string
	// Up is false before the machine joined and while it is crashed; Crashed only while crashed.
	Up, Crashed bool
	Connected   bool
	Sessions    int
	// Conns is the machine's open TCP connections: one while it holds a session, and those of
	// its tunnel data plane while tunnels are open (and idle for a while after).
	Conns    int
	Commands int64
	// Version is the daemon version the machine reports (daemon.FakeVersion until an upgrade);
	// Draining, whether a drain command told it to take no new work.
	Version   string
	Draining  bool
	Skew      time.Duration
	LastError error
	Inventory *daemonv1.Inventory
}

// Len is the number of machines.
func (f *Fleet) Len() int { return len(f.machines) }

// Machine reports machine i (0-based).
func (f *Fleet) Machine(i int) MachineStatus { return f.machines[i].status() }

// NodeIDs are the node ids of the machines that hold a session now.
func (f *Fleet) NodeIDs() []string {
	var out []string
	for _, m := range f.machines {
		if st := m.status(); st.Connected {
			out = append(out, st.NodeID)
		}
	}
	return out
}

// Disconnect breaks the connections of machines (by index): their daemons see the session
// fail and reconnect with backoff. It returns how many had a connection.
func (f *Fleet) Disconnect(indexes ...int) int {
	n := 0
	for _, i := range indexes {
		if f.machines[i].disconnect() {
			n++
		}
	}
	f.disconnects.Add(int64(n))
	return n
}

// Crash stops machine i's daemon as a crash would (its connection dies, nothing is said to the
// gateway). It reports whether the machine was up.
func (f *Fleet) Crash(i int) bool {
	if f.machines[i].halt() {
		f.crashes.Add(1)
		return true
	}
	return false
}

// Restart starts a crashed machine again: a new daemon with the same identity.
func (f *Fleet) Restart(i int) error {
	if f.ctx == nil {
		return errors.New("sim: the fleet is not running")
	}
	return f.machines[i].start(f.ctx)
}

// SetLatency delays every write on the machines' connections by d (zero removes it).
func (f *Fleet) SetLatency(d time.Duration, indexes ...int) {
	for _, i := range indexes {
		f.machines[i].latency.Store(int64(d))
	}
}

// inject runs fault i of the scenario until ctx ends.
func (f *Fleet) inject(ctx context.Context, i int, fault Fault) {
	r := f.faultRand(i)
	if !sleep(ctx, fault.After) {
		return
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	n := fault.machines(len(f.machines))
	every := fault.Every
	var flapping []*machine
	if fault.Kind == FaultFlap {
		flapping = f.choose(r, n, true)
		if every == 0 {
			every = DefaultFlapEvery
		}
	}
	start := time.Now()
	for {
		switch fault.Kind {
		case FaultDisconnect, FaultFlap:
			ms := flapping
			if ms == nil {
				ms = f.choose(r, n, true)
			}
			hit := 0
			for _, m := range ms {
				if m.disconnect() {
					hit++
				}
			}
			f.disconnects.Add(int64(hit))
			f.log.Info("injected disconnects", "kind", fault.Kind, "machines", hit)
		case FaultCrash:
			downtime := fault.For
			if downtime == 0 {
				downtime = DefaultCrashDowntime
			}
			for _, m := range f.choose(r, n, true) {
				if !m.halt() {
					continue
				}
				f.crashes.Add(1)
				wg.Go(func() {
					if sleep(ctx, downtime) {
						if err := m.start(ctx); err != nil {
							f.log.Warn("restart simulated machine", "host", m.hostname, "err", err)
						}
					}
				})
			}
			f.log.Info("injected crashes", "machines", n, "downtime", downtime)
		case FaultLatency:
			ms := f.choose(r, n, false)
			for _, m := range ms {
				m.latency.Store(int64(fault.Delay))
			}
			f.log.Info("injected latency", "machines", len(ms), "delay", fault.Delay)
			if fault.For > 0 {
				wg.Go(func() {
					sleep(ctx, fault.For)
					for _, m := range ms {
						m.latency.CompareAndSwap(int64(fault.Delay), 0)
					}
				})
			}
		}
		if every == 0 || (fault.Kind == FaultFlap && fault.For > 0 && time.Since(start)+every > fault.For) {
			return
		}
		if !sleep(ctx, every) {
			return
		}
	}
}

// faultRand is the random source of fault i: the same seed chooses the same machines.
func (f *Fleet) faultRand(i int) *rand.Rand {
	return rand.New(rand.NewPCG(f.opts.Seed, uint64(1)<<32|uint64(i)))
}

// choose picks n machines at random; with up, only among those running.
func (f *Fleet) choose(r *rand.Rand, n int, up bool) []*machine {
	pool := f.machines
	if up {
		pool = make([]*machine, 0, len(f.machines))
		for _, m := range f.machines {
			if m.running() {
				pool = append(pool, m)
			}
		}
	}
	n = min(n, len(pool))
	idx := r.Perm(len(pool))[:n]
	out := make([]*machine, n)
	for i, j := range idx {
		out[i] = pool[j]
	}
	return out
}

// sleep waits d, or less if ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
