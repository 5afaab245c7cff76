package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/daemon/state"
)

// JoinOptions configure Join.
type JoinOptions struct {
	StateDir string
	// Token is the join token, "bcj_<id>_<secret>".
	Token string
	// Gateway is "host:port".
	Gateway string
	// ServerName overrides the name the gateway's certificate is checked against.
	ServerName string
	// CAFile is the root CA (PEM) to verify the gateway with.
	CAFile string
	// CACertHashes pin the root CA ("sha256:<hex>" of its public key, cahash): without CAFile,
	// the root is fetched from the gateway and must match one (daemon.Dialer.FetchRoot); with
	// it, the file must. Join needs CAFile or a pin: it never trusts a gateway it cannot check.
	CACertHashes []string
	// Hostname is reported to the control plane; the host's name when empty.
	Hostname string
	TransportOptions
}

// Join generates the node's key on this host, spends the join token at the gateway, and writes
// the identity to the state directory, which must not hold one already.
func Join(ctx context.Context, opts JoinOptions) (state.Node, error) {
	var n state.Node
	if opts.Token == "" || opts.Gateway == "" {
		return n, errors.New("join needs a token (--token) and a gateway (--gateway host:port)")
	}
	if _, _, err := net.SplitHostPort(opts.Gateway); err != nil {
		return n, fmt.Errorf("gateway %q: want host:port: %w", opts.Gateway, err)
	}
	dir, err := state.New(opts.StateDir)
	if err != nil {
		return n, err
	}
	dialer, err := opts.dialer(daemon.Dialer{Gateway: opts.Gateway, ServerName: opts.ServerName}, state.Node{}, dir)
	if err != nil {
		return n, err
	}
	pins, err := parsePins(opts.CACertHashes)
	if err != nil {
		return n, err
	}
	hostname := opts.Hostname
	if hostname == "" {
		if hostname, err = os.Hostname(); err != nil {
			return n, fmt.Errorf("hostname: %w", err)
		}
	}
	if dir.Joined() {
		return n, dir.Create() // which names the identity there
	}
	// The root is settled before anything is written: a wrong pin leaves no trace.
	rootPEM, err := joinRoot(ctx, opts.CAFile, pins, dialer)
	if err != nil {
		return n, err
	}
	var wsCA []byte
	if opts.WebSocketCAFile != "" {
		if wsCA, err = os.ReadFile(opts.WebSocketCAFile); err != nil {
			return n, fmt.Errorf("--websocket-ca-file: %w", err)
		}
	}
	if err := dir.Create(); err != nil {
		return n, err
	}
	id, err := dialer.Join(ctx, rootPEM, opts.Token, hostname)
	if err != nil {
		return n, err
	}
	if err := checkAnswerRoot(id.RootPEM, pins); err != nil {
		return n, err
	}
	n = state.Node{
		Gateway: opts.Gateway, ServerName: opts.ServerName, Hostname: hostname, JoinedAt: time.Now().UTC(),
		Transport: opts.Transport, WebSocketURL: opts.WebSocketURL,
	}
	if wsCA != nil {
		if err := dir.SaveWebSocketCA(wsCA); err != nil {
			return n, fmt.Errorf("joined as node %s but could not save the WebSocket's CA: %w", id.NodeID, err)
		}
	}
	if err := dir.SaveJoin(id, n); err != nil {
		return n, fmt.Errorf("joined as node %s but could not save the identity: %w", id.NodeID, err)
	}
	n.NodeID, n.TrustDomain = id.NodeID, id.TrustDomain
	return n, nil
}

// RunOptions configure Run.
type RunOptions struct {
	StateDir string
	// Gateway, when set, replaces the gateway recorded at join.
	Gateway string
	// AllowExec adds to the allow list in the state directory's allow-exec file.
	AllowExec []string
	// AllowReboot lets reboot commands reboot the host.
	AllowReboot bool
	// AllowGPUReset lets gpuReset commands reset a GPU (Commands.AllowGPUReset).
	AllowGPUReset bool
	// Dcgmi is Commands.Dcgmi: the dcgmi diagnose runs.
	Dcgmi string
	// ReleaseURL and ReleaseKeys (minisign.pub files, at most MaxReleaseKeys) let upgrade
	// commands replace bcd's binary with a release from under ReleaseURL signed by one of the
	// keys (see Upgrader). Each needs the other.
	ReleaseURL  string
	ReleaseKeys []string
	// UpgradeDeadline is how long a new binary has to hold a session before it is rolled back
	// (DefaultUpgradeDeadline when 0).
	UpgradeDeadline time.Duration
	// Version is the daemon version reported in the hello.
	Version string
	// Executable is the binary an upgrade replaces; the running one when empty (with
	// NextSuffix removed: a new binary on trial runs as BINARY.next).
	Executable string
	// Reboot replaces RebootHost (tests).
	Reboot func() error
	// NvidiaSMI is Inventory.NvidiaSMI.
	NvidiaSMI string
	// GPUHealthInterval is how often GPU health is probed (GPUHealthCollector.Interval):
	// DefaultGPUHealthInterval when 0, else between 1s and 1h.
	GPUHealthInterval time.Duration
	// GPUUsageInterval is how often GPU usage is sampled (GPUUsageSampler.Interval), between 1s
	// and 1m; 0 samples nothing and sends no usage.
	GPUUsageInterval time.Duration
	// GPUMetricsListen, when set, is the address (127.0.0.1:9400) of a Prometheus endpoint that
	// serves the latest usage samples under dcgm-exporter's names; it needs GPUUsageInterval.
	GPUMetricsListen string
	// TunnelPorts is the local allow list of tunnels (daemon.Options.TunnelPorts): the ports of
	// 127.0.0.1 the control plane may open tunnels to. None by default.
	TunnelPorts []int
	// MaxBackoff bounds the reconnect delay (daemon.Options.MaxBackoff).
	MaxBackoff time.Duration
	Logger     *slog.Logger
	TransportOptions
}

// Run checks the state directory, then holds the node's session until ctx ends: reconnecting
// with backoff, renewing the certificate (and saving it), running commands, and answering
// `bcd status` on the state directory's unix socket.
func Run(ctx context.Context, opts RunOptions) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// A bad flag is named before anything else is checked.
	if err := daemon.ValidateTunnelPorts(opts.TunnelPorts); err != nil {
		return fmt.Errorf("--tunnel-port: %w", err)
	}
	if _, err := daemon.ParseTransport(opts.Transport); err != nil {
		return fmt.Errorf("--transport: %w", err)
	}
	if d := opts.GPUHealthInterval; d != 0 && (d < time.Second || d > time.Hour) {
		return fmt.Errorf("--gpu-health-interval %v: want a duration between 1s and 1h", d)
	}
	if d := opts.GPUUsageInterval; d != 0 && (d < time.Second || d > time.Minute) {
		return fmt.Errorf("--gpu-usage-interval %v: want 0 (off) or a duration between 1s and 1m", d)
	}
	if opts.GPUMetricsListen != "" && opts.GPUUsageInterval == 0 {
		return errors.New("--gpu-metrics-listen needs --gpu-usage-interval: the endpoint serves its samples")
	}
	dir, err := state.New(opts.StateDir)
	if err != nil {
		return err
	}
	upgrader, err := newUpgrader(opts, dir, log)
	if err != nil {
		return err
	}
	id, node, err := dir.Load()
	if err != nil {
		return err
	}
	unlock, err := dir.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	if opts.Gateway != "" {
		node.Gateway = opts.Gateway
	}
	dialer, err := opts.dialer(daemon.Dialer{Gateway: node.Gateway, ServerName: node.ServerName}, node, dir)
	if err != nil {
		return err
	}
	fileAllow, err := dir.AllowExec()
	if err != nil {
		return err
	}
	policy, err := NewExecPolicy(slices.Concat(fileAllow, opts.AllowExec))
	if err != nil {
		return err
	}
	// An upgrade that exec'd this binary, or failed to, is settled before the record is read.
	record := dir.Record()
	trial, err := upgrader.Resume(record)
	if err != nil {
		return err
	}
	if trial != nil {
		record.Hold(trial.Key())
	}
	held := make(chan struct{}, 1)
	inv := &Inventory{NvidiaSMI: opts.NvidiaSMI, Logger: log}
	gpuHealth := &daemon.GPUHealthFeed{}
	collector := NewGPUHealthCollector(inv, gpuHealth, opts.GPUHealthInterval, log)
	var gpuUsage *daemon.GPUUsageFeed
	var sampler *GPUUsageSampler
	if opts.GPUUsageInterval > 0 {
		gpuUsage = &daemon.GPUUsageFeed{}
		sampler = NewGPUUsageSampler(inv, gpuUsage, opts.GPUUsageInterval, log)
	}
	cmds := &Commands{
		Exec: policy, Inventory: inv.Collect, Drain: dir, Config: dir, AllowReboot: opts.AllowReboot, Reboot: opts.Reboot,
		Upgrader: upgrader, GPUs: inv, AllowGPUReset: opts.AllowGPUReset, Dcgmi: opts.Dcgmi, Logger: log,
	}
	agent, err := daemon.NewAgent(daemon.Options{
		Dialer:   dialer,
		Identity: id, Version: opts.Version, Inventory: inv.Collect, Handlers: cmds.Handlers(),
		OnRenew: func(id *daemon.Identity) error {
			if err := dir.SaveChain(id.ChainPEM); err != nil {
				log.Error("save the renewed certificate", "err", err)
				return err
			}
			return nil
		},
		Record: record, AfterResult: cmds.AfterResult,
		OnSession: func() {
			select {
			case held <- struct{}{}:
			default:
			}
		},
		MaxBackoff: opts.MaxBackoff, Logger: log, TunnelPorts: opts.TunnelPorts, GPUHealth: gpuHealth,
		GPUUsage: gpuUsage,
	})
	if err != nil {
		return err
	}
	started := time.Now().UTC()
	status := func() Status {
		s := agent.Status()
		draining, _, _ := dir.Draining()
		st := Status{
			Running: true, PID: os.Getpid(), Version: opts.Version, StartedAt: started, StateDir: dir.Path,
			NodeID: s.NodeID, TrustDomain: node.TrustDomain, Gateway: node.Gateway, Connected: s.Connected,
			Sessions: s.Sessions, Transport: string(s.Transport), CertNotAfter: s.NotAfter.UTC(), Draining: draining,
			AllowExec: policy.Allow, AllowReboot: opts.AllowReboot, TunnelPorts: opts.TunnelPorts, Tunnels: s.Tunnels,
		}
		if upgrader.Release != nil {
			st.AllowUpgrade, st.ReleaseURL, st.UpgradeDeadline = true, upgrader.Release.String(), upgrader.deadline().String()
			for _, k := range upgrader.Keys {
				st.ReleaseKeys = append(st.ReleaseKeys, k.ID.String())
			}
		}
		st.Upgrade, _ = dir.Upgrade()
		if s.LastError != nil {
			st.LastError = s.LastError.Error()
		}
		return st
	}
	health, err := serveHealth(dir.File(state.SocketFile), status, log)
	if err != nil {
		return err
	}
	defer health()
	log.Info("bcd running", "node_id", id.NodeID, "gateway", node.Gateway, "version", opts.Version,
		"state_dir", dir.Path, "allow_exec", policy.Allow, "allow_reboot", opts.AllowReboot,
		"allow_gpu_reset", opts.AllowGPUReset,
		"allow_upgrade", upgrader.Release != nil, "release_url", opts.ReleaseURL, "tunnel_ports", opts.TunnelPorts)
	if notAfter, err := id.NotAfter(); err == nil && time.Until(notAfter) < time.Hour {
		log.Warn("the node certificate expires soon; it is renewed once connected", "not_after", notAfter)
	}
	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var watching sync.WaitGroup
	// GPU health runs beside the session: its snapshots wait in the feed while disconnected.
	watching.Go(func() { collector.Run(runCtx) })
	if sampler != nil {
		watching.Go(func() { sampler.Run(runCtx) })
		if opts.GPUMetricsListen != "" {
			hostname, _ := os.Hostname()
			if err := ServeGPUMetrics(runCtx, opts.GPUMetricsListen, DCGMRegistry(hostname, sampler.Latest), log); err != nil {
				stop(nil)
				watching.Wait()
				return err
			}
			log.Info("GPU metrics endpoint listening", "addr", opts.GPUMetricsListen)
		}
	}
	if trial != nil {
		// A roll back that could not exec the old binary ends the process instead, so that
		// systemd starts the old binary.
		watching.Go(func() {
			if err := trial.Watch(runCtx, held, agent.Finish); err != nil {
				stop(err)
			}
		})
	}
	err = agent.Run(runCtx)
	stop(nil)
	watching.Wait()
	if cause := context.Cause(runCtx); err == nil && cause != nil && !errors.Is(cause, context.Canceled) {
		err = cause
	}
	log.Info("bcd stopped", "node_id", id.NodeID)
	return err
}

// newUpgrader returns the upgrader: with --release-url and its --release-key files, it upgrades;
// without them, it still settles an upgrade that was under way (Resume) and answers an upgrade
// to the running version, and refuses any other. Either flag without the other is an error, so
// that a half-configured node says so at start instead of refusing upgrades later.
func newUpgrader(opts RunOptions, dir *state.Dir, log *slog.Logger) (*Upgrader, error) {
	u := &Upgrader{Version: opts.Version, State: dir, Deadline: opts.UpgradeDeadline, Logger: log}
	switch {
	case opts.ReleaseURL != "" && len(opts.ReleaseKeys) == 0:
		return nil, errors.New("--release-url needs at least one --release-key, the minisign.pub releases are signed with")
	case opts.ReleaseURL == "" && len(opts.ReleaseKeys) > 0:
		return nil, errors.New("--release-key needs --release-url, where releases are fetched from")
	case opts.UpgradeDeadline != 0 && (opts.UpgradeDeadline < time.Second || opts.UpgradeDeadline > 24*time.Hour):
		return nil, fmt.Errorf("--upgrade-deadline %v: want a duration between 1s and 24h", opts.UpgradeDeadline)
	}
	exe := opts.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err == nil {
			exe, err = filepath.EvalSymlinks(exe)
		}
		if err != nil && opts.ReleaseURL != "" {
			return nil, fmt.Errorf("find the running binary (for upgrades): %w", err)
		}
	}
	// A new binary on trial runs as BINARY.next; what it replaces, and what upgrades after it
	// replace, is BINARY.
	u.Path = strings.TrimSuffix(exe, NextSuffix)
	if opts.ReleaseURL == "" {
		return u, nil
	}
	var err error
	if u.Release, err = ParseReleaseSource(opts.ReleaseURL); err != nil {
		return nil, err
	}
	if u.Keys, err = LoadReleaseKeys(opts.ReleaseKeys); err != nil {
		return nil, err
	}
	return u, nil
}

// serveHealth answers GET /status (JSON) and GET /healthz on a unix socket at path, until the
// returned function is called. The caller holds the state directory's lock, so a socket file
// already there is a dead daemon's and is replaced.
func serveHealth(path string, status func() Status, log *slog.Logger) (stop func(), err error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("health socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("health socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("health socket: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, status()) })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !status().Connected {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "running, not connected")
			return
		}
		fmt.Fprintln(w, "ok")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("health socket", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
		_ = os.Remove(path)
	}, nil
}
