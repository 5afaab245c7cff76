package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/buildinfo"
	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/database"
	"github.com/better-compute/better-compute/internal/devmode"
	"github.com/better-compute/better-compute/internal/migrate"
	"github.com/better-compute/better-compute/internal/moduleset"
	"github.com/better-compute/better-compute/internal/process"
	"github.com/better-compute/better-compute/internal/registry"
	"github.com/better-compute/better-compute/module"
)

// globals are the flags every command shares.
type globals struct {
	configPath string
	// modules are the binary's modules (main's list).
	modules moduleset.Registry
}

// enable enables the modules cfg names; an unknown module or a bad section is an error naming
// its key (modules[i], modules[i].config.<key>).
func (g *globals) enable(cfg *config.Config) (moduleset.Set, error) {
	if err := g.modules.Validate(); err != nil {
		return nil, err
	}
	return g.modules.Enable(cfg.Modules)
}

// Main runs the better-compute command line with the modules compiled in, and exits: 0 on
// success, otherwise the code ExitCode gives, after PrintError has said why on standard error.
func Main(modules []module.Info) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand(modules).ExecuteContext(ctx)
	stop()
	if err != nil {
		PrintError(os.Stderr, err)
		os.Exit(ExitCode(err))
	}
}

func newRootCommand(modules []module.Info) *cobra.Command {
	g := &globals{modules: modules}
	root := &cobra.Command{
		Use:   "better-compute",
		Short: "The Better Compute control plane",
		Long: `Better Compute is a control plane for fleets of compute hosts. Operators run it on their
own PostgreSQL; tenants lease capacity through its API; a daemon on every host dials out to
a gateway and does what it is told.

Every command reads one configuration: the file named by --config (or BETTER_COMPUTE_CONFIG),
then BETTER_COMPUTE_* environment variables, then flags.

` + Help,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.configPath, "config", os.Getenv("BETTER_COMPUTE_CONFIG"),
		"configuration file, better-compute.yaml (env BETTER_COMPUTE_CONFIG)")
	api := &Resolver{}
	api.AddFlags(root.PersistentFlags())
	root.AddCommand(newVersionCommand(), newMigrateCommand(g), newServeCommand(g), newDevCommand(g), newIAMCommand(g), newPKICommand(g), newDoctorCommand(g), newSimCommand(g), newTunnelCommand(api), newHostfileCommand(api), newReleaseCommand(), newWorkflowCommand(api), newReferenceCommand(g))
	// The API's commands: a registry that does not build is a programming error every command
	// then reports, as the server would refuse to start.
	reg, err := apiRegistry(g.modules)
	if err == nil {
		err = Attach(root, reg, Options{Resolver: api})
	}
	if err == nil {
		// Hand-written beside the generated method commands of its group.
		addRemediationsFollow(root, api)
		addCommandsRun(root, api)
	}
	if err != nil {
		root.PersistentPreRunE = func(*cobra.Command, []string) error { return err }
	}
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and build",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "better-compute %s (%s)\n", buildinfo.Version, buildinfo.Build())
			return nil
		},
	}
}

// databaseURL finds the database for commands that need only that: --database-url, then
// BETTER_COMPUTE_DATABASE_URL, then database.url of the configuration file.
func (g *globals) databaseURL(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if g.configPath == "" {
		return "", database.ErrNoURL
	}
	cfg, err := config.Load(g.configPath, os.Environ())
	if err != nil {
		return "", err
	}
	return cfg.Database.URL, cfg.RequireDatabase()
}

func databaseURLFlag(cmd *cobra.Command, target *string) {
	cmd.Flags().StringVar(target, "database-url", os.Getenv("BETTER_COMPUTE_DATABASE_URL"),
		"PostgreSQL URL (env BETTER_COMPUTE_DATABASE_URL; default database.url of --config)")
}

func newMigrateCommand(g *globals) *cobra.Command {
	var url string
	var status, dryRun bool
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply pending schema migrations",
		Long: `Apply pending schema migrations, each in its own transaction, under an advisory lock so
several processes can run it at once. --status lists every migration and whether it is applied;
--dry-run lists what would be applied and changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Minute)
			defer cancel()
			url, err := g.databaseURL(url)
			if err != nil {
				return err
			}
			pool, err := database.Open(ctx, url)
			if err != nil {
				return err
			}
			defer pool.Close()
			m, err := migrate.New(pool)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case status:
				states, err := m.Status(ctx)
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "MIGRATION\tSTATE\tAPPLIED AT")
				for _, s := range states {
					state, at := "pending", ""
					if s.Applied {
						state, at = "applied", s.AppliedAt.UTC().Format(time.RFC3339)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\n", s, state, at)
				}
				return tw.Flush()
			case dryRun:
				pending, err := m.Pending(ctx)
				if err != nil {
					return err
				}
				if len(pending) == 0 {
					fmt.Fprintln(out, "schema is current; nothing to apply")
				}
				for _, p := range pending {
					fmt.Fprintf(out, "would apply %s\n", p)
				}
				return nil
			}
			applied, err := m.Up(ctx)
			for _, a := range applied {
				fmt.Fprintf(out, "applied %s\n", a)
			}
			if err != nil {
				return err
			}
			if len(applied) == 0 {
				fmt.Fprintln(out, "schema is current; nothing to apply")
			}
			// The enabled modules' migrations follow the core's (with --config only).
			if g.configPath == "" {
				return nil
			}
			cfg, err := config.Load(g.configPath, os.Environ())
			if err != nil {
				return err
			}
			set, err := g.enable(cfg)
			if err != nil {
				return err
			}
			return migrate.ApplyAll(ctx, pool, process.NewLogger(config.Log{Level: "info", Format: "text"}, out), set.Migrations())
		},
	}
	databaseURLFlag(cmd, &url)
	cmd.Flags().BoolVar(&status, "status", false, "list migrations and whether each is applied")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "list pending migrations without applying them")
	cmd.MarkFlagsMutuallyExclusive("status", "dry-run")
	return cmd
}

// listenFlags are the flags that override where the API listens and which roles run.
type listenFlags struct {
	roles, host string
	port        int
}

func (f *listenFlags) add(cmd *cobra.Command, defaultHost string) {
	cmd.Flags().StringVar(&f.roles, "roles", "", "roles to run: all, or a comma list of api, gateway, controllers, scheduler, sinks, iam (env BETTER_COMPUTE_ROLES)")
	cmd.Flags().StringVar(&f.host, "host", defaultHost, "API listen host (env BETTER_COMPUTE_HOST)")
	cmd.Flags().IntVar(&f.port, "port", 3000, "API listen port, 0 for any free one (env BETTER_COMPUTE_PORT)")
}

// apply overrides cfg with the flags the user set, and validates the result.
func (f *listenFlags) apply(cmd *cobra.Command, cfg *config.Config) error {
	if cmd.Flags().Changed("roles") {
		cfg.Roles = f.roles
	}
	if cmd.Flags().Changed("host") {
		cfg.Host = f.host
	}
	if cmd.Flags().Changed("port") {
		cfg.Port = f.port
	}
	return cfg.Validate()
}

func newServeCommand(g *globals) *cobra.Command {
	var lf listenFlags
	var noMigrate bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the roles of a deployment",
		Long: `Run the roles named by --roles (default all): the API, the gateway and the worker roles.
Migrates the schema first unless --no-migrate. SIGTERM or Ctrl-C drains in-flight requests and
stops.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(g.configPath, os.Environ())
			if err != nil {
				return err
			}
			if err := lf.apply(cmd, cfg); err != nil {
				return err
			}
			if err := cfg.RequireDatabase(); err != nil {
				return err
			}
			set, err := g.enable(cfg)
			if err != nil {
				return err
			}
			log := process.NewLogger(cfg.Log, cmd.ErrOrStderr())
			ctx := cmd.Context()
			pool, err := database.OpenPool(ctx, cfg.Database.URL, database.PoolOptions{MaxConns: cfg.Database.MaxConns})
			if err != nil {
				return err
			}
			defer pool.Close()
			if len(set) > 0 {
				log.Info("modules enabled", "modules", strings.Join(set.Names(), ","))
			}
			if noMigrate {
				m, err := migrate.New(pool)
				if err != nil {
					return err
				}
				if current, err := m.Current(ctx); err != nil {
					return err
				} else if !current {
					log.Warn("the schema has pending migrations; /readyz will fail until `better-compute migrate` runs")
				}
			} else if err := migrate.ApplyAll(ctx, pool, log, set.Migrations()); err != nil {
				return err
			}
			return process.Run(ctx, process.Options{Config: cfg, Pool: pool, Logger: log, Modules: set})
		},
	}
	lf.add(cmd, "0.0.0.0")
	cmd.Flags().BoolVar(&noMigrate, "no-migrate", false, "do not apply pending migrations at start")
	return cmd
}

func newDevCommand(g *globals) *cobra.Command {
	var lf listenFlags
	var simTransport string
	opts := devmode.Options{}
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a whole deployment locally on a private PostgreSQL",
		Long: `Run every available role in one process. Without a database URL it starts a private
PostgreSQL from the binaries installed on this machine, kept between runs under the user cache
directory (--fresh starts over). It prints a fresh admin key and the API URL as lines
"API key: <key>" and "API: <url>". Without a configured secret it keeps a random one beside the
private cluster. It enables the configuration's modules, checked as serve checks them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if opts.SimTransport, err = daemon.ParseTransport(simTransport); err != nil {
				return fmt.Errorf("--sim-transport: %w", err)
			}
			// Without a secret in the file or the environment, dev keeps a random one.
			base := config.Default()
			if os.Getenv("BETTER_COMPUTE_SECRET") == "" {
				if base.Secret, err = devmode.Secret(opts.ClusterDir); err != nil {
					return err
				}
			}
			cfg, err := config.LoadOver(base, g.configPath, slices.DeleteFunc(os.Environ(), func(kv string) bool {
				return kv == "BETTER_COMPUTE_SECRET=" // empty is unset here, as above
			}))
			if err != nil {
				return err
			}
			if cfg.Host == config.Default().Host {
				cfg.Host = "127.0.0.1" // dev stays on loopback unless told otherwise
			}
			if err := lf.apply(cmd, cfg); err != nil {
				return err
			}
			// dev runs the modules serve would, with the same checks.
			if opts.Modules, err = g.enable(cfg); err != nil {
				return err
			}
			opts.Config = cfg
			opts.Out = cmd.OutOrStdout()
			opts.Logger = process.NewLogger(cfg.Log, cmd.ErrOrStderr())
			return devmode.Run(cmd.Context(), opts)
		},
	}
	lf.add(cmd, "127.0.0.1")
	cmd.Flags().Lookup("host").DefValue = "127.0.0.1, or host of the configuration"
	cmd.Flags().StringVar(&opts.ClusterDir, "data-dir", "", "private PostgreSQL directory (default under the user cache directory)")
	cmd.Flags().BoolVar(&opts.Fresh, "fresh", false, "delete the private PostgreSQL first")
	cmd.Flags().IntVar(&opts.Sim, "sim", 0, "run N simulated machines that join and hold sessions; prints \"Simulated machines: N joined\"")
	cmd.Flags().IntSliceVar(&opts.SimTunnelPorts, "sim-tunnel-ports", nil, "ports of 127.0.0.1 on this machine the simulated machines open tunnels to, comma separated or repeated (default none)")
	cmd.Flags().Float64Var(&opts.SimFailRate, "sim-fail-rate", 0, "share (0 to 1) of the simulated machines' upgrade, reboot, configure and exec commands that fail")
	cmd.Flags().DurationVar(&opts.SimRebootDowntime, "sim-reboot-downtime", daemon.DefaultRebootDowntime, "how long a reboot command keeps a simulated machine away")
	cmd.Flags().Float64Var(&opts.SimGPUFaultRate, "sim-gpu-fault-rate", 0, "expected share of the simulated GPUs that get a fault per hour (0.01: one in a hundred)")
	cmd.Flags().StringVar(&opts.SimControl, "sim-control", "", "the simulator's control socket for `better-compute sim inject` (default sim.sock beside the private PostgreSQL directory, printed as \"Simulator control: <path>\")")
	cmd.Flags().StringVar(&simTransport, "sim-transport", string(daemon.TransportH2), "how the simulated machines reach the gateway: h2 (direct), websocket or auto (direct, falling back to the WebSocket); websocket and auto open the gateway's WebSocket listener on loopback and print \"Gateway WebSocket: <url>\"")
	cmd.Flags().DurationVar(&opts.SimProviderDelay, "sim-provider-delay", 0, "enable the provision module with the sim provider and a machine class \"sim\" whose machines boot after this delay (default off)")
	return cmd
}

func newIAMCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "iam", Short: "Manage the embedded IAM from the command line"}
	var url, name string
	mint := &cobra.Command{
		Use:   "mint-admin-key",
		Short: "Print a new API key for an owner of the root tenant",
		Long: `Print a new API key for the root tenant's service account --name, creating it with the
owner role if needed: how an operator gets the first credential of a deployment.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			url, err := g.databaseURL(url)
			if err != nil {
				return err
			}
			pool, err := database.Open(cmd.Context(), url)
			if err != nil {
				return err
			}
			defer pool.Close()
			key, err := auth.MintAdminKey(cmd.Context(), pool, name)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), key)
			return nil
		},
	}
	databaseURLFlag(mint, &url)
	mint.Flags().StringVar(&name, "name", "admin", "service account name")
	cmd.AddCommand(mint)
	return cmd
}

// apiRegistry is the method registry of every API this binary can serve: the core's and every
// compiled-in module's, enabled or not, so the CLI has a command for each.
func apiRegistry(infos moduleset.Registry) (*registry.Registry, error) {
	return registry.FromGlobal(infos.Files()...)
}
