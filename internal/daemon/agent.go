package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1/daemonv1connect"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/fleet"
	"github.com/better-compute/better-compute/internal/pki/spiffeid"
	"github.com/better-compute/better-compute/internal/scrub"
	"github.com/better-compute/better-compute/internal/tunnelhop"
)

// Handler runs one type of command: it reads the command's typed payload (c.GetExec() for an
// exec, c.GetUpgrade() for an upgrade) and returns its result. It must respect ctx's deadline
// (the command's).
type Handler func(ctx context.Context, c *daemonv1.Command) (*structpb.Struct, error)

// Options configure an Agent.
type Options struct {
	Dialer   Dialer
	Identity *Identity
	// Version is the daemon version reported in the hello.
	Version string
	// Inventory reports what the node has; read at every session start.
	Inventory func(ctx context.Context) (*daemonv1.Inventory, error)
	// GPUHealth, when set, is the node's GPU health: its snapshot is sent after each hello and
	// again whenever it changes.
	GPUHealth *GPUHealthFeed
	// GPUUsage, when set, is the node's per-minute GPU usage: each minute it queues is sent
	// once a session is open (docs/gpus.md, "Utilisation sampling").
	GPUUsage *GPUUsageFeed
	// Handlers by command type (package command's names, the payload oneof's cases); a command
	// of another type, or with no payload, fails.
	Handlers map[string]Handler
	// OnRenew, when set, is called with the identity after every certificate renewal, so it can
	// be persisted.
	OnRenew func(*Identity) error
	// Backoff bounds the reconnect delay (exponential from 200ms with jitter); 30s by default.
	MaxBackoff time.Duration
	// Clock skew injected for tests of the gateway's tolerance; zero normally.
	ClockSkew time.Duration
	Logger    *slog.Logger
	// Record, when set, keeps the idempotency record outside the process, so that it survives a
	// restart (bcd keeps it in its state directory); without it the record is in memory only.
	Record Recorder
	// AfterResult, when set, is called once a command has run and its result is recorded and
	// queued for the gateway; not for a repeat answered from the record. bcd reboots here after
	// a reboot command, so that the result is never lost.
	AfterResult func(c *daemonv1.Command, r *daemonv1.CommandResult)
	// OnSession, when set, is called each time a session is held: the gateway's Welcome
	// received, and the results of earlier sessions queued on it. bcd commits an upgrade under
	// trial here.
	OnSession func()
	// TunnelPorts is the daemon's own allow list of tunnels (bcd run --tunnel-port): the ports
	// of 127.0.0.1 a TunnelOpen may reach, at most MaxTunnelPorts, each 1 to 65535. Empty by
	// default, which refuses every tunnel (tunnel.CodePortRefused), whatever the control plane
	// allows.
	TunnelPorts []int
	// MaxTunnels bounds the tunnels open at once (tunnelhop.DefaultPerNode by default); one more
	// is refused (tunnel.CodeReset).
	MaxTunnels int
}

// Recorder keeps an agent's idempotency record: the agent calls Started before it runs a
// command and Finished before it reports the result, and Load once, in NewAgent.
type Recorder interface {
	// Load returns the results finished since `since`. A command that started but never
	// finished (the process died while it ran) must come back as a failed result, so that a
	// re-delivery is answered instead of run again, unless it is known to finish later
	// (Recorded.Running).
	Load(since time.Time) ([]Recorded, error)
	Started(key string, c *daemonv1.Command) error
	Finished(key string, r *daemonv1.CommandResult) error
}

// Recorded is a result from a Recorder, by idempotency key.
type Recorded struct {
	Key      string
	Result   *daemonv1.CommandResult
	Finished time.Time
	// Running says the command has no result yet and is not to be run again: it outlived the
	// process that started it (an upgrade's new binary is on trial), and Agent.Finish reports
	// its result. A re-delivery is acked and answered then.
	Running bool
}

// Agent holds a node's session with the gateways.
type Agent struct {
	opts Options
	log  *slog.Logger

	mu        sync.Mutex
	identity  *Identity
	certAt    time.Time // when this agent got the current certificate
	notAfter  time.Time
	client    daemonv1connect.DaemonServiceClient
	transport *http.Transport
	connected bool
	sessions  int
	lastErr   error
	// results remembers finished commands by idempotency key: a re-delivered command is
	// answered from here, and recent results are reported again after a reconnect in case the
	// gateway died before recording them (the gateway records a result only once).
	results map[string]*record
	// send queues a message on the current session; nil between sessions.
	send func(*daemonv1.SessionRequest)
	// limits are what the gateway of the current (or last) session accepts.
	limits gatewayLimits
	// dataPlane carries tunnels, on connections of its own (see Dialer.dataPlane); replaced
	// with the certificate, like the session's client.
	dataPlane          *http.Client
	dataPlaneTransport *http.Transport

	tunnels tunnels
}

type record struct {
	result   *daemonv1.CommandResult
	finished time.Time
	running  bool
}

// resultMemory is how long results are kept and re-reported.
const resultMemory = 15 * time.Minute

// NewAgent returns an agent for an identity that has joined.
func NewAgent(opts Options) (*Agent, error) {
	if opts.Identity == nil {
		return nil, errors.New("daemon: no identity: join first")
	}
	// Gateways are checked against the trust domain: without one, any would pass.
	if err := spiffeid.ValidateTrustDomain(opts.Identity.TrustDomain); err != nil {
		return nil, fmt.Errorf("daemon: the identity's trust domain: %w", err)
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if err := ValidateTunnelPorts(opts.TunnelPorts); err != nil {
		return nil, fmt.Errorf("daemon: %w", err)
	}
	if opts.MaxTunnels <= 0 {
		opts.MaxTunnels = tunnelhop.DefaultPerNode
	}
	if opts.Dialer.Transport == TransportAuto && opts.Dialer.Choice == nil {
		opts.Dialer.Choice = &Choice{}
	}
	a := &Agent{opts: opts, log: opts.Logger.With("node_id", opts.Identity.NodeID), results: map[string]*record{}}
	a.tunnels.init(opts.TunnelPorts, opts.MaxTunnels)
	if err := a.setIdentity(opts.Identity); err != nil {
		return nil, err
	}
	if opts.Record != nil {
		recorded, err := opts.Record.Load(time.Now().Add(-resultMemory))
		if err != nil {
			return nil, fmt.Errorf("daemon: read the command record: %w", err)
		}
		for _, r := range recorded {
			a.results[r.Key] = &record{result: r.Result, finished: r.Finished, running: r.Running}
		}
	}
	return a, nil
}

func (a *Agent) setIdentity(id *Identity) error {
	cert, err := id.Certificate()
	if err != nil {
		return fmt.Errorf("daemon: node certificate: %w", err)
	}
	notAfter, err := id.NotAfter()
	if err != nil {
		return fmt.Errorf("daemon: node certificate: %w", err)
	}
	client, tr := a.opts.Dialer.client(id.RootPEM, &cert, id.TrustDomain, nil)
	dataPlane, dataTr := a.opts.Dialer.dataPlane(id.RootPEM, &cert, id.TrustDomain)
	a.mu.Lock()
	old, oldData := a.transport, a.dataPlaneTransport
	a.identity, a.notAfter, a.client, a.transport, a.certAt = id, notAfter, client, tr, time.Now()
	a.dataPlane, a.dataPlaneTransport = dataPlane, dataTr
	a.mu.Unlock()
	if old != nil {
		// The connection made with the previous certificate would otherwise stay open; one
		// that still carries tunnels closes after them, by the idle timeout.
		old.CloseIdleConnections()
		oldData.CloseIdleConnections()
	}
	return nil
}

// Status is what the agent knows of its connection.
type Status struct {
	NodeID    string
	Connected bool
	// Sessions counts the sessions opened so far.
	Sessions  int
	LastError error
	NotAfter  time.Time
	// Tunnels counts the tunnels open now (dialling their port or carrying data).
	Tunnels int
	// Transport is how the agent's connections reach the gateway now.
	Transport fleet.Transport
}

// Status reports the connection state.
func (a *Agent) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	return Status{
		NodeID: a.identity.NodeID, Connected: a.connected, Sessions: a.sessions, LastError: a.lastErr, NotAfter: a.notAfter,
		Tunnels: int(a.tunnels.count.Load()), Transport: a.via(),
	}
}

// Run holds a session until ctx ends: it reconnects after every loss with exponential backoff
// and jitter, and meanwhile renews the certificate once two thirds of its remaining lifetime
// have passed. A tunnel is not bound to the session that opened it (its gateway decides whether
// it outlives the session) but to Run: when Run returns, every tunnel is closed, and so are the
// agent's connections.
func (a *Agent) Run(ctx context.Context) error {
	defer func() {
		a.tunnels.wait()
		a.mu.Lock()
		tr, dataTr := a.transport, a.dataPlaneTransport
		a.mu.Unlock()
		tr.CloseIdleConnections()
		dataTr.CloseIdleConnections()
	}()
	renewing := make(chan struct{})
	go func() { defer close(renewing); a.renewLoop(ctx) }()
	defer func() { <-renewing }()
	attempt := 0
	for ctx.Err() == nil {
		start := time.Now()
		err := a.session(ctx)
		a.mu.Lock()
		a.connected, a.lastErr = false, err
		a.mu.Unlock()
		if ctx.Err() != nil {
			return nil
		}
		if time.Since(start) > time.Minute {
			attempt = 0 // the session was healthy; start the backoff over
		}
		attempt++
		delay := backoff(attempt, a.opts.MaxBackoff)
		a.log.Info("session ended; reconnecting", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
	}
	return nil
}

// backoff is 200ms doubling to max, with full jitter in its upper half.
func backoff(attempt int, max time.Duration) time.Duration {
	d := min(200*time.Millisecond<<min(attempt-1, 10), max)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// renewLoop renews the certificate when two thirds of the time between getting it and its
// expiry have passed (measured from receipt, because certificates are backdated for clock
// skew), retrying failures every few seconds until it expires.
func (a *Agent) renewLoop(ctx context.Context) {
	for {
		a.mu.Lock()
		id, got := a.identity, a.certAt
		a.mu.Unlock()
		notAfter, err := id.NotAfter()
		if err != nil {
			a.log.Error("read node certificate", "err", err)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(got.Add(notAfter.Sub(got) * 2 / 3))):
		}
		for {
			err := a.renew(ctx)
			if err == nil || ctx.Err() != nil {
				break
			}
			a.log.Warn("renew certificate; retrying", "err", err, "expires", notAfter)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff(3, 5*time.Second)):
			}
		}
	}
}

// renew replaces the certificate with a fresh one for the same key.
func (a *Agent) renew(ctx context.Context) error {
	a.mu.Lock()
	id, client := a.identity, a.client
	a.mu.Unlock()
	csr, err := NewCSR(id.Key, id.NodeID)
	if err != nil {
		return err
	}
	res, err := client.Renew(ctx, &daemonv1.RenewRequest{Csr: csr})
	if err != nil {
		return err
	}
	renewed := *id
	renewed.ChainPEM = res.GetCertificateChain()
	if err := a.setIdentity(&renewed); err != nil {
		return err
	}
	a.log.Info("renewed node certificate", "not_after", res.GetNotAfter().AsTime())
	if a.opts.OnRenew != nil {
		return a.opts.OnRenew(&renewed)
	}
	return nil
}

// ErrGoodbye is returned when the gateway ended the session.
var ErrGoodbye = errors.New("the gateway ended the session")

// session runs one session until it breaks.
func (a *Agent) session(ctx context.Context) error {
	a.mu.Lock()
	client, tr := a.client, a.transport
	a.mu.Unlock()
	// A renewal (or retryDirect) during the session replaced the transport; its connection, busy with this
	// session then, is closed once the session is over: at once if the stream is already gone,
	// else a moment later (the HTTP/2 client forgets a closed stream asynchronously), else by
	// the transport's idle timeout.
	defer func() {
		a.mu.Lock()
		replaced := a.transport != tr
		a.mu.Unlock()
		if replaced {
			tr.CloseIdleConnections()
			time.AfterFunc(time.Second, tr.CloseIdleConnections)
		}
	}()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.Session(sctx)
	if err != nil {
		return err
	}
	// Closing both halves is what unblocks a pending Receive when the session must end: the
	// HTTP/2 client does not abort a stream whose request body is still open on ctx alone.
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		<-sctx.Done()
		_ = stream.CloseRequest()
		_ = stream.CloseResponse()
	}()
	// Return once the stream is closed, so the connection is idle (and closable) afterwards.
	defer func() { cancel(); <-closed }()
	inv, err := a.inventory(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(&daemonv1.SessionRequest{Msg: &daemonv1.SessionRequest_Hello{Hello: &daemonv1.Hello{
		DaemonVersion: a.opts.Version, Inventory: inv, Time: timestamppb.New(time.Now().Add(a.opts.ClockSkew)),
	}}}); err != nil {
		// A stream the server or the handshake ended says why only to Receive (a refused
		// gateway identity, a revoked node); Send sees io.EOF.
		if errors.Is(err, io.EOF) {
			if _, rerr := stream.Receive(); rerr != nil {
				err = rerr
			}
		}
		return fmt.Errorf("send hello: %w", err)
	}
	first, err := stream.Receive()
	if err != nil {
		return fmt.Errorf("session refused: %w", err)
	}
	welcome := first.GetWelcome()
	if welcome == nil {
		return fmt.Errorf("session: want a welcome, got %v", first)
	}
	a.mu.Lock()
	a.connected, a.lastErr = true, nil
	a.sessions++
	limits := limitsOf(welcome)
	a.limits = limits
	a.mu.Unlock()
	a.log.Info("session open", "transport", a.via())
	if a.opts.Dialer.Transport == TransportAuto {
		go a.retryDirect(sctx, cancel)
	}

	// One writer for the stream.
	out := make(chan *daemonv1.SessionRequest, 64)
	writeErr := make(chan error, 1)
	go func() {
		for {
			select {
			case <-sctx.Done():
				writeErr <- nil
				return
			case m := <-out:
				if err := stream.Send(m); err != nil {
					writeErr <- err
					cancel()
					return
				}
			}
		}
	}()
	send := func(m *daemonv1.SessionRequest) {
		// An event over the gateway's limit would end the session; it is dropped instead.
		if e := m.GetEvent(); e != nil && !eventFits(e, limits.eventBytes) {
			a.log.Warn("dropped an event over the gateway's limit (limits.daemonEventBytes)",
				"type", e.GetType(), "bytes", proto.Size(e), "limit", limits.eventBytes)
			return
		}
		select {
		case out <- m:
		case <-sctx.Done():
		}
	}
	a.mu.Lock()
	a.send = send
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.send = nil
		a.mu.Unlock()
	}()
	// Report recent results again: the previous gateway may have died before recording them.
	// Those recorded by an earlier process (before a restart or an exec) go out here too.
	for key, r := range a.recentResults() {
		send(&daemonv1.SessionRequest{Msg: &daemonv1.SessionRequest_Result{Result: a.fitResult(key, r)}})
	}
	if a.opts.OnSession != nil {
		a.opts.OnSession()
	}
	go a.sendGPUHealth(sctx, send)
	go a.sendGPUUsage(sctx, send)
	interval := time.Duration(max(welcome.GetHeartbeatIntervalSeconds(), 1)) * time.Second
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
				send(&daemonv1.SessionRequest{Msg: &daemonv1.SessionRequest_Heartbeat{Heartbeat: &daemonv1.Heartbeat{Time: timestamppb.New(time.Now().Add(a.opts.ClockSkew))}}})
			}
		}
	}()
	for {
		msg, err := stream.Receive()
		if err != nil {
			select {
			case werr := <-writeErr:
				if werr != nil {
					return werr
				}
			default:
			}
			return err
		}
		switch m := msg.Msg.(type) {
		case *daemonv1.SessionResponse_Command:
			a.command(sctx, m.Command, send)
		case *daemonv1.SessionResponse_TunnelOpen:
			// On Run's context: the tunnel's stream is not the session's.
			a.openTunnel(ctx, m.TunnelOpen)
		case *daemonv1.SessionResponse_Goodbye:
			return fmt.Errorf("%w: %s", ErrGoodbye, m.Goodbye.GetReason())
		}
	}
}

func (a *Agent) inventory(ctx context.Context) (*daemonv1.Inventory, error) {
	if a.opts.Inventory == nil {
		return &daemonv1.Inventory{}, nil
	}
	inv, err := a.opts.Inventory(ctx)
	if err != nil {
		return nil, fmt.Errorf("read inventory: %w", err)
	}
	// What the host reports (a disk model, a hostname) may hold bytes protobuf cannot send; the
	// copy keeps the caller's inventory untouched.
	inv = proto.CloneOf(inv)
	scrub.Message(inv)
	return inv, nil
}

// command acks and runs a command, or answers it from the record when its idempotency key was
// seen before.
func (a *Agent) command(ctx context.Context, c *daemonv1.Command, send func(*daemonv1.SessionRequest)) {
	key := KeyOf(c)
	send(&daemonv1.SessionRequest{Msg: &daemonv1.SessionRequest_Ack{Ack: &daemonv1.CommandAck{CommandId: c.GetId()}}})
	a.mu.Lock()
	rec, seen := a.results[key]
	if !seen {
		rec = &record{running: true}
		a.results[key] = rec
	}
	running := rec.running
	a.mu.Unlock()
	if seen {
		if !running {
			send(&daemonv1.SessionRequest{Msg: &daemonv1.SessionRequest_Result{Result: a.fitResult(key, rec)}})
		}
		return // still running: its result goes out when it finishes
	}
	if a.opts.Record != nil {
		if err := a.opts.Record.Started(key, c); err != nil {
			a.log.Warn("record command start", "command_id", c.GetId(), "err", err)
		}
	}
	go func() {
		res := a.finish(key, rec, a.run(ctx, c))
		if a.opts.AfterResult != nil {
			a.opts.AfterResult(c, res)
		}
	}()
}

// KeyOf is the key a command is recorded under: its idempotency key, or its id without one.
func KeyOf(c *daemonv1.Command) string {
	if k := c.GetIdempotencyKey(); k != "" {
		return k
	}
	return c.GetId()
}

// Finish reports the result of a command that finished outside a handler, under its key (see
// KeyOf): one that outlived the process that received it, as an upgrade does when the new
// binary it exec'd holds a session. The result is recorded, answers any re-delivery from now
// on, and is sent on the current session, or on the next one when none is open. AfterResult is
// not called.
func (a *Agent) Finish(key string, res *daemonv1.CommandResult) {
	a.mu.Lock()
	rec, ok := a.results[key]
	if !ok {
		rec = &record{running: true}
		a.results[key] = rec
	}
	a.mu.Unlock()
	a.finish(key, rec, res)
}

// finish records res as rec's result (key's), capped to the gateway's limit, and reports it on
// the current session; it returns what was recorded.
func (a *Agent) finish(key string, rec *record, res *daemonv1.CommandResult) *daemonv1.CommandResult {
	// Capped before it is recorded, so that a re-delivery answers with what was sent.
	a.mu.Lock()
	lim := a.limits.resultBytes
	a.mu.Unlock()
	if capped, over := capResult(res, lim); over {
		a.log.Warn("a command result is over the gateway's limit; reporting the command failed",
			"command_id", res.GetCommandId(), "bytes", proto.Size(res), "limit", lim)
		res = capped
	}
	if a.opts.Record != nil {
		if err := a.opts.Record.Finished(key, res); err != nil {
			a.log.Warn("record command result", "command_id", res.GetCommandId(), "err", err)
		}
	}
	a.mu.Lock()
	rec.result, rec.finished, rec.running = res, time.Now(), false
	a.forgetOld()
	current := a.send
	a.mu.Unlock()
	// Report on the session open now, which may not be the one the command came on; with none
	// open, the next session reports it.
	if current != nil {
		current(&daemonv1.SessionRequest{Msg: &daemonv1.SessionRequest_Result{Result: a.fitResult(key, rec)}})
	}
	return res
}

func (a *Agent) run(ctx context.Context, c *daemonv1.Command) *daemonv1.CommandResult {
	res := &daemonv1.CommandResult{CommandId: c.GetId()}
	typ, _ := command.PayloadOf(c)
	if typ == "" {
		res.Error = "the command carries no payload this daemon knows (a newer gateway's command type?)"
		return res
	}
	h, ok := a.opts.Handlers[typ]
	if !ok {
		res.Error = fmt.Sprintf("this daemon has no handler for command type %q", typ)
		return res
	}
	// The command's deadline bounds it, not the session: a reconnect must not kill it.
	rctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), c.GetDeadline().AsTime())
	defer cancel()
	out, err := h(rctx, c)
	if err != nil {
		// A handler may return what it has along with its error (an exec's exit code and output).
		res.Error, res.Result = err.Error(), out
	} else {
		res.Success, res.Result = true, out
	}
	// A handler's text may be anything (an error naming a file with odd bytes, output with a
	// NUL): make it valid UTF-8 without NUL, or protobuf refuses to send the result and the
	// session would drop and resend it forever.
	scrub.Message(res)
	return res
}

// recentResults are the finished records of the last resultMemory, by idempotency key.
func (a *Agent) recentResults() map[string]*record {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]*record{}
	for k, r := range a.results {
		if !r.running && time.Since(r.finished) < resultMemory {
			out[k] = r
		}
	}
	return out
}

// fitResult is the result of the finished record rec (idempotency key key) to send on the
// current session. One over the gateway's limit (finished while no gateway had said, recorded
// before a gateway with a lower limit, or by an older daemon) is replaced by a failed result
// that says so, in memory and in the Recorder, so that it is never sent again.
func (a *Agent) fitResult(key string, rec *record) *daemonv1.CommandResult {
	a.mu.Lock()
	res, lim := rec.result, a.limits.resultBytes
	capped, over := capResult(res, lim)
	if over {
		rec.result = capped
	}
	a.mu.Unlock()
	if !over {
		return res
	}
	a.log.Warn("a recorded command result is over the gateway's limit; reporting the command failed",
		"command_id", res.GetCommandId(), "bytes", proto.Size(res), "limit", lim)
	if a.opts.Record != nil {
		if err := a.opts.Record.Finished(key, capped); err != nil {
			a.log.Warn("record command result", "command_id", res.GetCommandId(), "err", err)
		}
	}
	return capped
}

// forgetOld drops results past resultMemory; a.mu is held.
func (a *Agent) forgetOld() {
	for k, r := range a.results {
		if !r.running && time.Since(r.finished) > resultMemory {
			delete(a.results, k)
		}
	}
}

// IsPermanent reports whether a session error will not heal by retrying (the node was revoked
// or its certificate is no longer accepted).
func IsPermanent(err error) bool {
	c := connect.CodeOf(err)
	return c == connect.CodePermissionDenied || c == connect.CodeUnauthenticated
}
