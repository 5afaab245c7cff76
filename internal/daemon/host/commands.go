// Package host is bcd on a real Linux host: its inventory (read from /proc, /sys, /etc, uname and
// nvidia-smi), its command handlers (exec under an allow list, collectInventory, drain and
// undrain, configure, upgrade and reboot behind explicit flags), and the wiring of the daemon
// itself: join, run (the daemon.Agent session with the state directory, the command record and
// a local health endpoint on a unix socket) and status.
package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/daemon/state"
)

// Command types bcd handles.
const (
	CommandExec             = command.Exec
	CommandCollectInventory = command.CollectInventory
	CommandDrain            = command.Drain
	CommandUndrain          = command.Undrain
	CommandUpgrade          = command.Upgrade
	CommandReboot           = command.Reboot
	CommandConfigure        = command.Configure
	CommandGPUReset         = command.GpuReset
	CommandDiagnose         = command.Diagnose
)

// maintenance are the commands a draining node still runs: reading it (collectInventory),
// changing the drain itself, and upgrade, reboot, configure, gpuReset and diagnose, the
// maintenance a node is drained for (each behind its own flags). A draining node refuses only
// exec, the work it was taken out of service not to run; undrain first.
var maintenance = map[string]bool{
	CommandCollectInventory: true, CommandDrain: true, CommandUndrain: true, CommandReboot: true,
	CommandConfigure: true, CommandUpgrade: true, CommandGPUReset: true, CommandDiagnose: true,
}

// ConfigStore keeps the configuration a configure command applied (the state directory does).
type ConfigStore interface {
	Config() ([]byte, error)
	SaveConfig([]byte) error
}

// DrainState keeps whether the node is draining (the state directory does, across restarts).
type DrainState interface {
	Draining() (bool, time.Time, error)
	SetDraining(bool) error
}

// Commands are bcd's command handlers.
type Commands struct {
	Exec      ExecPolicy
	Inventory func(context.Context) (*daemonv1.Inventory, error)
	Drain     DrainState
	// Config keeps what configure applies; without it configure fails.
	Config ConfigStore
	// Upgrader runs upgrade commands (see Upgrader.Upgrade); nil refuses them.
	Upgrader *Upgrader
	// AllowReboot lets the reboot command reboot the host (bcd run --allow-reboot); without it
	// the command fails and nothing happens.
	AllowReboot bool
	// Reboot reboots the host; RebootHost when nil. Tests inject their own.
	Reboot func() error
	// GPUs is the inventory whose nvidia-smi (program and bounds) gpuReset runs and whose GPUs
	// it may reset; nil refuses gpuReset.
	GPUs *Inventory
	// AllowGPUReset lets gpuReset reset a GPU (bcd run --allow-gpu-reset); without it the
	// command fails and nothing happens.
	AllowGPUReset bool
	// Dcgmi is the dcgmi program diagnose runs; empty looks it up on PATH, "-" means never (the
	// diagnose result is then "unavailable").
	Dcgmi  string
	Logger *slog.Logger

	mu           sync.Mutex
	rebootPlease bool
}

// Handlers returns the handlers by command type. While the node is draining, exec fails with
// "draining"; everything else runs.
func (c *Commands) Handlers() map[string]daemon.Handler {
	hs := map[string]daemon.Handler{
		CommandExec: func(ctx context.Context, cmd *daemonv1.Command) (*structpb.Struct, error) {
			return c.Exec.Exec(ctx, cmd.GetExec())
		},
		CommandCollectInventory: c.collectInventory,
		CommandConfigure:        c.configure,
		CommandDrain:            c.drain,
		CommandUndrain:          c.undrain,
		CommandUpgrade:          c.upgrade,
		CommandReboot:           c.reboot,
		CommandGPUReset:         c.gpuReset,
		CommandDiagnose:         c.diagnose,
	}
	for typ, h := range hs {
		if !maintenance[typ] {
			hs[typ] = c.gate(h)
		}
	}
	return hs
}

// ErrDraining is the error of work refused while the node drains.
var ErrDraining = errors.New("draining: this node takes no new work")

func (c *Commands) gate(h daemon.Handler) daemon.Handler {
	return func(ctx context.Context, cmd *daemonv1.Command) (*structpb.Struct, error) {
		if c.Drain != nil {
			on, since, err := c.Drain.Draining()
			if err != nil {
				return nil, fmt.Errorf("read the drain state: %w", err)
			}
			if on {
				return nil, fmt.Errorf("%w (draining since %s; an undrain command lifts it)", ErrDraining, since.UTC().Format(time.RFC3339))
			}
		}
		return h(ctx, cmd)
	}
}

// AfterResult does what must wait until a command's result is recorded: the reboot. It is
// daemon.Options.AfterResult. (An upgrade needs nothing here: its new binary reports the result
// itself, see Upgrader.)
func (c *Commands) AfterResult(cmd *daemonv1.Command, res *daemonv1.CommandResult) {
	if typ, _ := command.PayloadOf(cmd); !res.GetSuccess() || typ != CommandReboot {
		return
	}
	c.mu.Lock()
	due := c.rebootPlease
	c.rebootPlease = false
	c.mu.Unlock()
	if !due {
		return
	}
	reboot := c.Reboot
	if reboot == nil {
		reboot = RebootHost
	}
	c.logger().Warn("rebooting the host, as a reboot command asked")
	if err := reboot(); err != nil {
		c.logger().Error("reboot", "err", err)
	}
}

// collectInventory reads the inventory again; the result is the inventory as the API shows it
// (protojson), which the gateway stores as the node's inventory.
func (c *Commands) collectInventory(ctx context.Context, _ *daemonv1.Command) (*structpb.Struct, error) {
	if c.Inventory == nil {
		return nil, errors.New("collectInventory: no inventory on this daemon")
	}
	inv, err := c.Inventory(ctx)
	if err != nil {
		return nil, err
	}
	return toStruct(inv)
}

func (c *Commands) drain(_ context.Context, _ *daemonv1.Command) (*structpb.Struct, error) {
	if c.Drain == nil {
		return nil, errors.New("drain: no drain state on this daemon")
	}
	if err := c.Drain.SetDraining(true); err != nil {
		return nil, fmt.Errorf("drain: %w", err)
	}
	_, since, _ := c.Drain.Draining()
	c.logger().Info("draining: new work is refused until an undrain command")
	return structpb.NewStruct(map[string]any{"draining": true, "since": since.UTC().Format(time.RFC3339)})
}

func (c *Commands) undrain(_ context.Context, _ *daemonv1.Command) (*structpb.Struct, error) {
	if c.Drain == nil {
		return nil, errors.New("undrain: no drain state on this daemon")
	}
	if err := c.Drain.SetDraining(false); err != nil {
		return nil, fmt.Errorf("undrain: %w", err)
	}
	c.logger().Info("undrained: taking new work again")
	return structpb.NewStruct(map[string]any{"draining": false})
}

// ErrUpgradeNotAllowed is the error of an upgrade to another version on a node whose daemon runs
// without --release-url and --release-key.
var ErrUpgradeNotAllowed = errors.New("upgrade: not allowed on this node (bcd runs without --release-url and --release-key); nothing fetched")

func (c *Commands) upgrade(ctx context.Context, cmd *daemonv1.Command) (*structpb.Struct, error) {
	if c.Upgrader == nil {
		return nil, ErrUpgradeNotAllowed
	}
	return c.Upgrader.Upgrade(ctx, cmd)
}

// configure applies a configuration: it writes the payload's config, as JSON with sorted keys,
// to the state directory (config.json, mode 0600), where the host's own tools read it. The
// result is {"path", "sha256", "bytes", "changed"}: changed is false when the same
// configuration was already applied.
func (c *Commands) configure(_ context.Context, cmd *daemonv1.Command) (*structpb.Struct, error) {
	if c.Config == nil {
		return nil, errors.New("configure: no state directory on this daemon")
	}
	data, err := daemon.ConfigJSON(cmd.GetConfigure().GetConfig())
	if err != nil {
		return nil, err
	}
	old, err := c.Config.Config()
	if err != nil {
		return nil, fmt.Errorf("configure: %w", err)
	}
	changed := !bytes.Equal(old, data)
	if changed {
		if err := c.Config.SaveConfig(data); err != nil {
			return nil, fmt.Errorf("configure: %w", err)
		}
	}
	sum := daemon.ConfigSHA256(data)
	c.logger().Info("configure: applied the configuration", "sha256", sum, "changed", changed)
	return structpb.NewStruct(map[string]any{
		"path": state.ConfigFile, "sha256": sum, "bytes": float64(len(data)), "changed": changed,
	})
}

// ErrRebootNotAllowed is the error of a reboot on a node whose daemon runs without
// --allow-reboot.
var ErrRebootNotAllowed = errors.New("reboot: not allowed on this node (bcd runs without --allow-reboot); nothing done")

func (c *Commands) reboot(_ context.Context, _ *daemonv1.Command) (*structpb.Struct, error) {
	if !c.AllowReboot {
		return nil, ErrRebootNotAllowed
	}
	c.mu.Lock()
	c.rebootPlease = true
	c.mu.Unlock()
	return structpb.NewStruct(map[string]any{"rebooting": true})
}

// RebootHost asks systemd for a clean reboot (services stopped, file systems synced).
func RebootHost() error {
	for _, argv := range [][]string{{"systemctl", "reboot"}, {"reboot"}} {
		path, err := exec.LookPath(argv[0])
		if err != nil {
			continue
		}
		out, err := exec.Command(path, argv[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %w: %s", path, err, out)
		}
		return nil
	}
	return errors.New("neither systemctl nor reboot is installed")
}

func (c *Commands) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// toStruct turns a message into a Struct through its JSON form (camelCase field names, int64 as
// strings, as the API shows them).
func toStruct(m proto.Message) (*structpb.Struct, error) {
	data, err := protojson.Marshal(m)
	if err != nil {
		return nil, err
	}
	var fields map[string]any
	if err := json.Unmarshal(data, &fields); err != nil {
		return nil, err
	}
	return structpb.NewStruct(fields)
}
