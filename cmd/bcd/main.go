// Command bcd is the Better Compute node daemon: it joins a deployment once, then holds a session
// with its gateways and runs the commands it is sent. The work is done by daemon/host and
// daemon/state; this only maps flags to them.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/better-compute/better-compute/internal/buildinfo"
	"github.com/better-compute/better-compute/internal/daemon/host"
	"github.com/better-compute/better-compute/internal/daemon/state"
)

// exitNotRunning is bcd status's exit code when no daemon answers (as LSB status commands do).
const exitNotRunning = 3

// exitError carries an exit code other than 1.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	var ee exitError
	switch {
	case errors.As(err, &ee):
		os.Exit(ee.code)
	case err != nil:
		fmt.Fprintln(os.Stderr, "bcd:", strings.Join(strings.Fields(err.Error()), " "))
		os.Exit(1)
	}
}

type globals struct {
	stateDir string
	logLevel string
}

func (g *globals) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: level})), nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func newRootCommand() *cobra.Command {
	g := &globals{}
	root := &cobra.Command{
		Use:   "bcd",
		Short: "The Better Compute node daemon",
		Long: `bcd runs on every host of a Better Compute fleet. It joins once with a join token
(bcd join), then holds a session with the deployment's gateways (bcd run, usually from the
systemd unit), reports the host's inventory and runs the commands it is sent. It only dials
out. Its identity lives in the state directory (` + state.DefaultDir + ` by default).`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&g.stateDir, "state-dir", envOr("BCD_STATE_DIR", state.DefaultDir), "state directory (env BCD_STATE_DIR)")
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", envOr("BCD_LOG_LEVEL", "info"), "log level: debug, info, warn or error (env BCD_LOG_LEVEL)")
	root.AddCommand(newJoinCommand(g), newRunCommand(g), newStatusCommand(g), newVersionCommand())
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and build",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(cmd.OutOrStdout(), "bcd %s (%s)\n", buildinfo.Version, buildinfo.Build())
			return nil
		},
	}
}

func newJoinCommand(g *globals) *cobra.Command {
	var o host.JoinOptions
	cmd := &cobra.Command{
		Use:   "join --token TOKEN --gateway HOST:PORT (--ca-cert-hash sha256:HEX | --ca-file root-ca.pem)",
		Short: "Join a deployment with a join token",
		Long: `Generate the node's private key on this host, send a certificate request with the join
token to the gateway, and write the key, certificate chain, root CA and node id to the state
directory (0700, files 0600). The key never leaves the host. A state directory that already
holds an identity is left alone: remove it to join as a new node.

The gateway is checked against the deployment's root CA, given one of two ways:
--ca-cert-hash sha256:HEX, the root's pin that joinTokens/create prints beside the token (and
better-compute pki status shows): bcd takes the root the gateway shows in its handshake, and
refuses it, sending nothing and writing nothing, unless the SHA-256 of its public key is one of
the pins (repeat the flag to accept a root and its successor); or --ca-file root-ca.pem, the
root itself (better-compute pki export-root writes it). With neither, bcd join refuses: it never
trusts the first gateway it meets. The root is kept in the state directory for bcd run, and so
are --transport, --websocket-url and --websocket-ca-file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.StateDir = g.stateDir
			if len(o.CACertHashes) == 0 && os.Getenv("BCD_CA_CERT_HASH") != "" {
				o.CACertHashes = strings.Fields(os.Getenv("BCD_CA_CERT_HASH"))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), time.Minute)
			defer cancel()
			n, err := host.Join(ctx, o)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Joined as node %s (trust domain %s) through %s; state in %s\n",
				n.NodeID, n.TrustDomain, n.Gateway, g.stateDir)
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Token, "token", os.Getenv("BCD_JOIN_TOKEN"), "join token, bcj_… (env BCD_JOIN_TOKEN, which keeps it out of the process list)")
	cmd.Flags().StringVar(&o.Gateway, "gateway", os.Getenv("BCD_GATEWAY"), "gateway address host:port (env BCD_GATEWAY)")
	cmd.Flags().StringVar(&o.CAFile, "ca-file", "", "root CA (PEM) to verify the gateway with (better-compute pki export-root writes it)")
	cmd.Flags().StringArrayVar(&o.CACertHashes, "ca-cert-hash", nil, fmt.Sprintf("pin of the root CA, sha256:HEX of its public key, as joinTokens/create prints it: the root is fetched from the gateway and refused unless it matches (repeatable, at most %d; env BCD_CA_CERT_HASH)", host.MaxCACertHashes))
	cmd.Flags().StringVar(&o.ServerName, "server-name", "", "name to verify the gateway's certificate against; default the gateway's host")
	cmd.Flags().StringVar(&o.Hostname, "hostname", "", "host name to report; default this host's")
	transportFlags(cmd, &o.TransportOptions, "h2")
	return cmd
}

// transportFlags are join's and run's choice of how to reach the gateway; def is what an unset
// --transport means.
func transportFlags(cmd *cobra.Command, o *host.TransportOptions, def string) {
	cmd.Flags().StringVar(&o.Transport, "transport", "", "how to reach the gateway: h2 (direct), websocket (through the HTTPS_PROXY/NO_PROXY of the environment), or auto (direct, falling back to websocket when a proxy blocks it; the direct path is tried again hourly); default "+def)
	cmd.Flags().StringVar(&o.WebSocketURL, "websocket-url", "", "the gateway's WebSocket listener, wss://host/path; default wss://GATEWAY-HOST:443/bettercompute.daemon.v1/websocket")
	cmd.Flags().StringVar(&o.WebSocketCAFile, "websocket-ca-file", "", "CA (PEM) of the WebSocket's outer TLS, when a proxy's or load balancer's certificate is signed by neither the system's roots nor the deployment's root; join keeps a copy for run")
}

func newRunCommand(g *globals) *cobra.Command {
	var o host.RunOptions
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Hold the node's session and run its commands",
		Long: `Check the state directory (refusing to start on a key that does not match its certificate,
files others can read, or anything else it cannot trust), then hold a session with the gateway:
reconnect with backoff and jitter, renew the certificate before it expires, and run commands.
SIGTERM or Ctrl-C stops it. Logs go to stderr as JSON; bcd status asks it through the unix
socket bcd.sock in the state directory.

exec runs only the programs on the allow list: --allow-exec, plus the lines of the file
allow-exec in the state directory (absolute paths; argv[0] must match one exactly, and the file
it resolves to through symlinks must be listed too). A program starts with PATH=` + host.ExecPath + `
and only the LANG, LANGUAGE, NO_COLOR, TZ and LC_* variables its command sets; nothing of
bcd's own environment. reboot needs --allow-reboot, gpuReset --allow-gpu-reset (and refuses
a GPU any process uses). diagnose runs DCGM's dcgmi diag (--dcgmi, default the one on PATH);
without DCGM its result is "unavailable".

A tunnel reaches only a port of 127.0.0.1 on --tunnel-port (repeatable, at most 64; none by
default): the control plane may allow a port, but bcd dials it only when its own list has it.

upgrade needs --release-url and at least one --release-key. An upgrade names a release version
only: bcd fetches RELEASE-URL/VERSION/SHA256SUMS and its signature SHA256SUMS.minisig, which must
verify with one of the keys and name that very version in its trusted comment, then
bcd_VERSION_linux_ARCH, whose SHA-256 must be the one SHA256SUMS lists; downloads and redirects
stay under the release URL. The new binary waits beside the old one as BINARY.next and is
exec'd in place (same PID) on trial: only once it holds a session within --upgrade-deadline
does it replace BINARY and report the upgrade succeeded. If it holds none in time it execs the
old binary again, and if it exits, systemd (Restart=always) starts BINARY, the old one; either
way the old binary reports the upgrade failed and why. An upgrade to the running version
succeeds at once.

A draining node refuses exec only; upgrade, reboot, configure, gpuReset and diagnose are what a
drain is for.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			o.StateDir, o.Logger, o.Version = g.stateDir, log, buildinfo.Version
			if err := host.Run(cmd.Context(), o); err != nil {
				log.Error("bcd run refused to start or failed", "err", err.Error())
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&o.AllowExec, "allow-exec", nil, "programs exec may run, absolute paths, comma separated or repeated (adds to the state directory's allow-exec file)")
	cmd.Flags().BoolVar(&o.AllowReboot, "allow-reboot", false, "let reboot commands reboot this host")
	cmd.Flags().BoolVar(&o.AllowGPUReset, "allow-gpu-reset", false, "let gpuReset commands reset an idle GPU (nvidia-smi --gpu-reset)")
	cmd.Flags().StringVar(&o.Dcgmi, "dcgmi", "", `the dcgmi diagnose commands run; default the one on PATH, "-" for none (diagnose then reports "unavailable")`)
	cmd.Flags().StringVar(&o.ReleaseURL, "release-url", "", "base URL of releases, e.g. https://releases.example.com/bc (release VERSION is BASE/VERSION/); with --release-key, lets upgrade commands replace bcd")
	cmd.Flags().StringArrayVar(&o.ReleaseKeys, "release-key", nil, fmt.Sprintf("minisign.pub file of a key releases are signed with (repeatable, at most %d; needs --release-url)", host.MaxReleaseKeys))
	cmd.Flags().DurationVar(&o.UpgradeDeadline, "upgrade-deadline", host.DefaultUpgradeDeadline, "how long a new binary has to hold a session before it is rolled back")
	cmd.Flags().StringVar(&o.Gateway, "gateway", "", "gateway host:port; default the one joined through")
	cmd.Flags().DurationVar(&o.MaxBackoff, "max-backoff", 30*time.Second, "longest wait between reconnection attempts")
	cmd.Flags().DurationVar(&o.GPUHealthInterval, "gpu-health-interval", host.DefaultGPUHealthInterval, "how often GPU health is read through nvidia-smi (1s to 1h); Xid events in the kernel log are sent as they come")
	cmd.Flags().DurationVar(&o.GPUUsageInterval, "gpu-usage-interval", host.DefaultGPUUsageInterval, "how often GPU utilisation, memory, power and temperature are sampled through nvidia-smi (1s to 1m; 0 off); per-GPU summaries are sent each minute")
	cmd.Flags().StringVar(&o.GPUMetricsListen, "gpu-metrics-listen", "", "serve the latest GPU usage samples as Prometheus metrics with dcgm-exporter's names at http://ADDR/metrics (e.g. 127.0.0.1:9400); off when empty")
	cmd.Flags().IntSliceVar(&o.TunnelPorts, "tunnel-port", nil, "port of 127.0.0.1 tunnels may reach, e.g. 22 (comma separated or repeated; default none)")
	transportFlags(cmd, &o.TransportOptions, "the one joined with")
	return cmd
}

func newStatusCommand(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print what the daemon knows",
		Long: `Ask the running daemon through its unix socket in the state directory; when none answers,
print what the state directory says (and whether bcd run would accept it). Exits 0 when a
daemon answers, 3 when none does.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := host.ReadStatus(cmd.Context(), g.stateDir)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				if err := enc.Encode(s); err != nil {
					return err
				}
			} else {
				s.Format(out)
			}
			if !s.Running {
				return exitError{exitNotRunning}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
