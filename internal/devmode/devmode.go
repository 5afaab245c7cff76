// Package devmode runs a whole deployment in one process for local development: a private
// PostgreSQL (unless the configuration names a database), the schema, the root tenant and an
// admin key, and every available role, printing the lines a developer or a script needs.
package devmode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/migrate"
	provisionmod "github.com/better-compute/better-compute/internal/modules/provision"
	"github.com/better-compute/better-compute/internal/moduleset"
	"github.com/better-compute/better-compute/internal/pgcluster"
	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/internal/process"
	"github.com/better-compute/better-compute/internal/sim"
)

// Options configure a dev deployment.
type Options struct {
	// Config is the deployment configuration; an empty database.url starts the private cluster.
	Config *config.Config
	// ClusterDir holds the private cluster; empty means pgcluster.DefaultDir().
	ClusterDir string
	// Fresh deletes the private cluster first, starting from an empty database.
	Fresh bool
	// Sim is the number of simulated machines to run against the gateway (0 for none); they keep
	// their identities beside the private cluster, so the next run reconnects them.
	Sim int
	// SimTunnelPorts is the simulated machines' tunnel allow list (sim.Options.TunnelPorts): their
	// daemons open tunnels to these ports of 127.0.0.1 on this machine. None by default.
	SimTunnelPorts []int
	// SimFailRate (0 to 1) is the share of the simulated machines' upgrade, reboot, configure and
	// exec commands that fail (sim.Options.FailRate); SimRebootDowntime how long a reboot keeps
	// one away (sim.Options.RebootDowntime).
	SimFailRate       float64
	SimRebootDowntime time.Duration
	// SimGPUFaultRate is the expected share of the simulated GPUs that get a fault per hour
	// (sim.Options.GPUFaultRate).
	SimGPUFaultRate float64
	// SimControl is where the simulator's control socket listens (`better-compute sim inject`;
	// sim.ListenControl); SimControlPath("" or ClusterDir) when empty. It is printed as
	// "Simulator control: <path>".
	SimControl string
	// SimTransport is how the simulated machines reach the gateway (daemon.Dialer.Transport;
	// h2 when empty). For websocket and auto, dev opens the gateway's WebSocket listener beside
	// the gateway's (see webSocketFor) and the machines dial the URL it prints as
	// "Gateway WebSocket: <url>".
	SimTransport daemon.Transport
	// SimProviderDelay, when positive, enables the provision module with the sim provider and
	// a machine class "sim" of the root tenant whose machines boot after this delay, and prints
	// "Sim provider: class sim, boot delay <d>".
	SimProviderDelay time.Duration
	// Modules are the enabled modules of the configuration (as serve enables them); with
	// SimProviderDelay, dev adds the provision module with the sim provider, so they must not
	// hold provision already.
	Modules moduleset.Set
	// Out receives the lines scripts read: "Gateway: <addr>" (and "Gateway WebSocket: <url>"
	// when that listener is open), "API key: <key>", then "API: <url>" and
	// "Dashboard: <url>", and with Sim, "Simulator control: <path>" once its control socket
	// listens and "Simulated machines: <n> joined" once they all hold sessions.
	Out    io.Writer
	Logger *slog.Logger
}

// databaseName is the database dev creates in its private cluster.
const databaseName = "better_compute"

// adminName is the root service account whose fresh key dev prints at every start.
const adminName = "dev-admin"

// Run starts everything and blocks until ctx ends, then stops it all in order.
func Run(ctx context.Context, opts Options) error {
	cfg, log := *opts.Config, opts.Logger
	if err := daemon.ValidateTunnelPorts(opts.SimTunnelPorts); err != nil {
		return fmt.Errorf("--sim-tunnel-ports: %w", err)
	}
	if _, err := daemon.ParseTransport(string(opts.SimTransport)); err != nil {
		return fmt.Errorf("--sim-transport: %w", err)
	}
	if err := (daemon.FakeOptions{FailRate: opts.SimFailRate, RebootDowntime: opts.SimRebootDowntime}).Validate(); err != nil {
		return fmt.Errorf("--sim-fail-rate, --sim-reboot-downtime: %w", err)
	}
	if !(opts.SimGPUFaultRate >= 0) || math.IsInf(opts.SimGPUFaultRate, 1) {
		return fmt.Errorf("--sim-gpu-fault-rate: must be a finite number, 0 or more, got %v", opts.SimGPUFaultRate)
	}
	if opts.SimProviderDelay > 0 && slices.Contains(opts.Modules.Names(), provisionmod.Name) {
		return errors.New("--sim-provider-delay enables the provision module with the sim provider: the configuration's modules must not enable it too")
	}
	if cfg.Database.URL == "" {
		cluster, err := startCluster(ctx, opts)
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := cluster.Stop(sctx); err != nil {
				log.Error("stop private PostgreSQL", "err", err)
			}
		}()
		if cfg.Database.URL, err = createDatabase(ctx, cluster); err != nil {
			return err
		}
		fmt.Fprintln(opts.Out, cluster.Binaries())
		fmt.Fprintf(opts.Out, "PostgreSQL: 127.0.0.1:%d database %s user postgres (password in %s/password)\n",
			cluster.Port(), databaseName, cluster.Dir())
	}
	pool, err := database.OpenPool(ctx, cfg.Database.URL, database.PoolOptions{MaxConns: cfg.Database.MaxConns})
	if err != nil {
		return err
	}
	defer pool.Close()
	modules := slices.Clone(opts.Modules)
	if opts.SimProviderDelay > 0 {
		m, err := simProvisioning(&cfg)
		if err != nil {
			return err
		}
		modules = append(modules, m)
	}
	if err := migrate.ApplyAll(ctx, pool, log, modules.Migrations()); err != nil {
		return err
	}
	if opts.SimProviderDelay > 0 {
		if err := ensureSimClass(ctx, pool, opts.SimProviderDelay); err != nil {
			return err
		}
	}
	key, err := auth.MintAdminKey(ctx, pool, adminName)
	if err != nil {
		return err
	}
	rootCA, err := initPKI(ctx, pool, &cfg, opts)
	if err != nil {
		return err
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = listenBaseURL(cfg.Host, cfg.Port)
	}
	if cfg.Gateway.Listen == "" { // dev runs a gateway on loopback unless configured otherwise
		cfg.Gateway.Listen, cfg.Gateway.ControlListen = "127.0.0.1:0", "127.0.0.1:0"
	}
	if opts.Sim > 0 {
		webSocketFor(&cfg.Gateway, opts.SimTransport)
	}
	if opts.Sim > 0 && !cfg.RoleSet()[config.RoleGateway] {
		return errors.New("dev --sim needs the gateway role")
	}
	// The simulated machines stop before dev returns, whether ctx ended or a role failed.
	simCtx, stopSim := context.WithCancel(ctx)
	var simulating sync.WaitGroup
	defer simulating.Wait()
	defer stopSim()
	return process.Run(ctx, process.Options{
		Config: &cfg, Pool: pool, Logger: log, Modules: modules,
		OnListen: func(l process.Listening) {
			apiURL, gatewayAddr := l.APIURL, l.Gateway
			if gatewayAddr != "" {
				fmt.Fprintf(opts.Out, "Gateway: %s\n", gatewayAddr)
				if l.GatewayWebSocket != "" {
					fmt.Fprintf(opts.Out, "Gateway WebSocket: %s\n", l.GatewayWebSocket)
				}
				fmt.Fprintf(opts.Out, "Root CA: %s\n", rootCA)
			}
			fmt.Fprintf(opts.Out, "API key: %s\nAPI: %s\nDashboard: %s/dashboard/\n", key, apiURL, strings.TrimSuffix(apiURL, cfg.BasePath))
			if opts.SimProviderDelay > 0 {
				fmt.Fprintf(opts.Out, "Sim provider: class %s, boot delay %s\n", simClass, opts.SimProviderDelay)
			}
			if opts.Sim > 0 {
				simulating.Go(func() {
					if err := simulate(simCtx, pool, l, rootCA, opts); err != nil && simCtx.Err() == nil {
						log.Error("simulated machines", "err", err)
						fmt.Fprintf(opts.Out, "Simulated machines: failed: %v\n", err)
					}
				})
			}
		},
	})
}

// simulate runs opts.Sim simulated machines against the gateway listening at l until ctx ends,
// by opts.SimTransport. They join with a fresh multi-use token of the root tenant, labelled
// simulated=true, unless they kept an identity from an earlier run.
func simulate(ctx context.Context, pool *pgxpool.Pool, l process.Listening, rootCA string, opts Options) error {
	root, err := os.ReadFile(rootCA)
	if err != nil {
		return err
	}
	dir, err := clusterDirOrDefault(opts.ClusterDir)
	if err != nil {
		return err
	}
	token, err := simJoinToken(ctx, pool, opts.Sim)
	if err != nil {
		return err
	}
	gateway, serverName := dialAddr(l.Gateway)
	fleet, err := sim.New(sim.Options{
		Gateway: gateway, ServerName: serverName, RootPEM: root, Token: token, N: opts.Sim,
		Transport: opts.SimTransport, WebSocketURL: webSocketDialURL(l.GatewayWebSocket),
		StateDir: dir + ".sim", Logger: opts.Logger, TunnelPorts: opts.SimTunnelPorts,
		FailRate: opts.SimFailRate, RebootDowntime: opts.SimRebootDowntime, GPUFaultRate: opts.SimGPUFaultRate,
	})
	if err != nil {
		return err
	}
	control := opts.SimControl
	if control == "" {
		control = simControlPath(dir)
	}
	controlDone, err := sim.StartControl(ctx, control, fleet)
	if err != nil {
		return fmt.Errorf("the simulator's control socket: %w", err)
	}
	defer func() { <-controlDone }() // ctx has ended when simulate returns
	fmt.Fprintf(opts.Out, "Simulator control: %s\n", control)
	ran := make(chan error, 1)
	go func() { ran <- fleet.Run(ctx) }()
	<-fleet.JoinDone()
	if errs := fleet.JoinErrors(); len(errs) > 0 {
		s := fleet.Stats()
		fmt.Fprintf(opts.Out, "Simulated machines: %d of %d joined; first error: %v\n", s.Joined(), s.Machines, errs[0])
	}
	if s, err := fleet.WaitConnected(ctx); err == nil {
		fmt.Fprintf(opts.Out, "Simulated machines: %d joined\n", s.Connected)
	}
	return <-ran
}

// simJoinToken mints a join token for n machines, as joinTokens/create does for the root tenant.
func simJoinToken(ctx context.Context, pool *pgxpool.Pool, n int) (string, error) {
	root, err := auth.EnsureRootTenant(ctx, pool)
	if err != nil {
		return "", err
	}
	k := auth.NewJoinToken()
	if _, err := db.New(pool).CreateJoinToken(ctx, db.CreateJoinTokenParams{
		ID: k.ID, TenantID: root.ID, Description: "dev --sim", Labels: []byte(`{"simulated":"true"}`),
		SecretHash: k.Hash(), MaxUses: int32(n), ExpiresAt: time.Now().Add(time.Hour),
	}); err != nil {
		return "", fmt.Errorf("create the simulated machines' join token: %w", err)
	}
	return k.String(), nil
}

// dialAddr is where to reach a gateway listening on addr, and the name its certificate has:
// an unspecified host is this machine, by the name process gives the gateway's certificate.
func dialAddr(addr string) (dial, serverName string) {
	host, port, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsUnspecified() {
		return addr, ""
	}
	name, err := os.Hostname()
	if err != nil {
		name = ""
	}
	return net.JoinHostPort("127.0.0.1", port), name
}

// listenBaseURL is the origin dev serves the API at on a fixed port, http://host:port (an
// unspecified host as 127.0.0.1), so that what needs the public URL works without configuring
// baseURL: the sign-in's callback, which the identity provider redirects the browser to. With
// port 0 the port is known only once listening, after the API is built: "" (no baseURL).
func listenBaseURL(host string, port int) string {
	if port == 0 {
		return ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(port))
}

// DevTrustDomain is the trust domain of a dev deployment whose configuration names none.
const DevTrustDomain = "dev.better-compute.local"

// initPKI initialises the machine PKI on first use, and writes its root CA beside the private
// cluster for daemons to verify the gateway with (bcd join --ca-file).
func initPKI(ctx context.Context, pool *pgxpool.Pool, cfg *config.Config, opts Options) (string, error) {
	td := cfg.TrustDomain
	if td == "" {
		td = DevTrustDomain
	}
	b, err := pki.Init(ctx, pool, cfg.Secret, td)
	if errors.Is(err, pki.ErrInitialized) {
		b, err = pki.Load(ctx, pool, cfg.Secret)
	}
	if err != nil {
		return "", err
	}
	cfg.TrustDomain = b.TrustDomain()
	path, err := rootCAPath(opts.ClusterDir)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, b.RootPEM(), 0o644); err != nil {
		return "", fmt.Errorf("write root CA: %w", err)
	}
	return path, nil
}

// Secret returns the deployment secret dev uses when none is configured: random, kept beside
// the private cluster so sealed data stays readable across runs.
func Secret(clusterDir string) (string, error) {
	dir, err := clusterDirOrDefault(clusterDir)
	if err != nil {
		return "", err
	}
	path := dir + ".secret"
	if b, err := os.ReadFile(path); err == nil && len(b) >= config.MinSecretLength {
		return string(b), nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("dev secret: %w", err)
	}
	secret := pgcluster.RandomToken()
	if err := os.WriteFile(path, []byte(secret), 0o600); err != nil {
		return "", fmt.Errorf("dev secret: %w", err)
	}
	return secret, nil
}

// SimControlPath is where dev's simulator listens for its control API (`better-compute sim
// inject`) by default: sim.sock in the directory that keeps the simulated machines' identities,
// beside the private cluster in clusterDir (pgcluster.DefaultDir() when empty).
func SimControlPath(clusterDir string) (string, error) {
	dir, err := clusterDirOrDefault(clusterDir)
	if err != nil {
		return "", err
	}
	return simControlPath(dir), nil
}

func simControlPath(clusterDir string) string { return filepath.Join(clusterDir+".sim", "sim.sock") }

// rootCAPath is where dev writes the PKI's root CA.
func rootCAPath(clusterDir string) (string, error) {
	dir, err := clusterDirOrDefault(clusterDir)
	if err != nil {
		return "", err
	}
	return dir + ".root-ca.pem", nil
}

func clusterDirOrDefault(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	return pgcluster.DefaultDir()
}

func startCluster(ctx context.Context, opts Options) (*pgcluster.Cluster, error) {
	dir, err := clusterDirOrDefault(opts.ClusterDir)
	if err != nil {
		return nil, err
	}
	if opts.Fresh {
		// The simulated machines' identities go with the deployment that issued them.
		for _, d := range []string{dir, dir + ".sim"} {
			if err := os.RemoveAll(d); err != nil {
				return nil, fmt.Errorf("remove %s: %w", d, err)
			}
		}
	}
	return pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Logger: opts.Logger})
}

// createDatabase makes the dev database on first use and returns its URL.
func createDatabase(ctx context.Context, c *pgcluster.Cluster) (string, error) {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return "", fmt.Errorf("connect to private PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{databaseName}.Sanitize())
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42P04") { // duplicate_database
		return "", fmt.Errorf("create database %s: %w", databaseName, err)
	}
	return c.URL(databaseName), nil
}
