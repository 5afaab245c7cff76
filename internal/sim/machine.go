package sim

import (
	"context"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon"
)

// machine is one simulated host: its inventory and identity, and the daemon running for it now
// (a crash replaces it with a new one of the same identity).
type machine struct {
	f        *Fleet
	index    int
	hostname string
	inv      *daemonv1.Inventory
	skew     time.Duration
	// choice is what the auto transport learned, shared by the machine's connections as
	// bcd's are.
	choice daemon.Choice
	// latency delays every write on the machine's connections, in nanoseconds.
	latency atomic.Int64

	mu sync.Mutex
	id *daemon.Identity
	// fake is the machine's daemon, made at its first start; a crash stops its Run and the
	// restart runs it again, so what it keeps (version, drain flag, configuration, command
	// record) survives as bcd's state directory would.
	fake  *daemon.Fake
	stop  context.CancelFunc // nil while the machine is down
	done  chan struct{}
	conns []*conn
	// crashed is set from a crash to the restart.
	crashed bool
}

func (m *machine) setIdentity(id *daemon.Identity) {
	m.mu.Lock()
	m.id = id
	m.mu.Unlock()
}

// dialerFor is how the machine reaches the gateway: by the fleet's transport, over its own TCP
// connections, tracked so faults can break them, and those of the tunnel data plane delayed by
// the fleet's TunnelRTT. The WebSocket's outer TLS trusts the fleet's root only.
func (m *machine) dialerFor() daemon.Dialer {
	o := m.f.opts
	d := daemon.Dialer{
		Gateway: o.Gateway, ServerName: o.ServerName, RootCAs: m.f.roots, DialContext: m.dial,
		Transport: o.Transport, WebSocketURL: o.WebSocketURL, WebSocketRootCAs: m.f.roots, Choice: &m.choice,
	}
	if rtt := m.f.opts.TunnelRTT; rtt > 0 {
		d.TunnelDialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := m.dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return DelayConn(c, rtt/2), nil
		}
	}
	return d
}

func (m *machine) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := m.f.dialer.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	wc := &conn{Conn: c, m: m}
	m.mu.Lock()
	m.conns = append(m.conns, wc)
	m.mu.Unlock()
	return wc, nil
}

// start runs the machine's daemon, unless it runs already.
func (m *machine) start(ctx context.Context) error {
	m.mu.Lock()
	id, fake, running := m.id, m.fake, m.stop != nil
	m.mu.Unlock()
	if running {
		return nil
	}
	if fake == nil {
		o := m.f.opts
		var err error
		fake, err = daemon.NewFake(id, daemon.FakeOptions{
			Dialer: m.dialerFor(), Inventory: m.inv, Handlers: o.Handlers, ClockSkew: m.skew, Logger: m.f.agentLog,
			TunnelPorts: o.TunnelPorts, RebootDowntime: o.RebootDowntime, StuckReboots: o.StuckReboots,
			FailRate: o.FailRate, FailTypes: o.FailTypes, Seed: o.Seed, UsageInterval: o.GPUUsageInterval,
		})
		if err != nil {
			return err
		}
		m.assignLoads(fake)
	}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	m.mu.Lock()
	if m.stop != nil { // started meanwhile
		m.mu.Unlock()
		cancel()
		return nil
	}
	if m.fake == nil {
		m.fake = fake
	}
	fake = m.fake
	m.stop, m.done, m.crashed = cancel, done, false
	m.mu.Unlock()
	go func() {
		defer close(done)
		_ = fake.Run(actx)
	}()
	return nil
}

// halt stops the daemon as a crash would: its context ends and its connections die. It reports
// whether a daemon was running.
func (m *machine) halt() bool {
	m.mu.Lock()
	stop, done := m.stop, m.done
	m.stop, m.done = nil, nil
	m.mu.Unlock()
	if stop == nil {
		return false
	}
	stop()
	m.disconnect()
	<-done
	m.mu.Lock()
	m.crashed = m.stop == nil
	m.mu.Unlock()
	return true
}

// disconnect closes the machine's connections; it reports whether there were any.
func (m *machine) disconnect() bool {
	m.mu.Lock()
	conns := slices.Clone(m.conns)
	m.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	return len(conns) > 0
}

func (m *machine) running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stop != nil
}

func (m *machine) status() MachineStatus {
	m.mu.Lock()
	fake, id := m.fake, m.id
	st := MachineStatus{
		Hostname: m.hostname, Up: m.stop != nil, Crashed: m.crashed, Conns: len(m.conns), Skew: m.skew, Inventory: m.inv,
	}
	m.mu.Unlock()
	if id != nil {
		st.NodeID = id.NodeID
	}
	if fake != nil {
		s := fake.Status()
		st.Connected, st.LastError, st.Sessions = s.Connected, s.LastError, s.Sessions
		st.Commands = commands(fake)
		st.Version, st.Draining = fake.Version(), fake.Draining()
	}
	return st
}

func commands(f *daemon.Fake) int64 {
	var n int64
	for _, c := range f.Runs {
		n += c.Load()
	}
	return n
}

// conn is a machine's TCP connection: writes wait out the machine's injected latency, and
// closing it forgets it.
type conn struct {
	net.Conn
	m    *machine
	once sync.Once
}

func (c *conn) Write(b []byte) (int, error) {
	if d := c.m.latency.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	return c.Conn.Write(b)
}

func (c *conn) Close() error {
	c.once.Do(func() {
		c.m.mu.Lock()
		c.m.conns = slices.DeleteFunc(c.m.conns, func(x *conn) bool { return x == c })
		c.m.mu.Unlock()
	})
	return c.Conn.Close()
}
