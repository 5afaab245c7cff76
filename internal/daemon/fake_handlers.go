package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/command"
)

// fakeUpgradeDeadline is the trial a failed upgrade's message names: bcd's default time for a
// new binary to hold a session.
const fakeUpgradeDeadline = 2 * time.Minute

// slowRebootFactor is how much longer than RebootDowntime a failing reboot keeps the daemon away.
const slowRebootFactor = 10

// rebootGrace is how long a rebooting FakeDaemon keeps its session after the reboot's result is
// queued, as a host takes a moment to stop its services: the result goes out on that session.
const rebootGrace = 100 * time.Millisecond

// errHandedOver is what a FakeDaemon's upgrade handler returns in the process it left: the next
// process reports the upgrade's result, and this one's is ignored.
var errHandedOver = errors.New("upgrade: handed over to the new version, which reports the result")

// builtins are the built-in handlers of process gen, by command type; Fake's doc says what each
// does.
func (f *Fake) builtins(gen int) map[string]Handler {
	return map[string]Handler{
		command.Echo: fakeEcho,
		command.CollectInventory: func(context.Context, *daemonv1.Command) (*structpb.Struct, error) {
			return inventoryStruct(f.inventory.Load())
		},
		command.Drain:     f.drain,
		command.Undrain:   f.undrain,
		command.Configure: f.configure,
		command.Exec:      f.exec,
		command.Upgrade: func(ctx context.Context, c *daemonv1.Command) (*structpb.Struct, error) {
			return f.upgrade(ctx, gen, c)
		},
		command.Reboot:   f.reboot,
		command.GpuReset: f.gpuReset,
		command.Diagnose: f.diagnose,
	}
}

// fakeEcho is the FakeDaemon's echo: it returns the payload's data, after data.sleepSeconds
// (within the command's deadline), or fails with data.fail when that is a string.
func fakeEcho(ctx context.Context, c *daemonv1.Command) (*structpb.Struct, error) {
	data := c.GetEcho().GetData()
	if s := data.GetFields()["sleepSeconds"].GetNumberValue(); s > 0 {
		select {
		case <-time.After(time.Duration(s * float64(time.Second))):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if msg, ok := data.GetFields()["fail"].GetKind().(*structpb.Value_StringValue); ok {
		return nil, errors.New(msg.StringValue)
	}
	if data == nil {
		data = &structpb.Struct{}
	}
	return data, nil
}

func (f *Fake) drain(context.Context, *daemonv1.Command) (*structpb.Struct, error) {
	f.mu.Lock()
	if !f.draining {
		f.draining, f.drainedAt = true, time.Now()
	}
	since := f.drainedAt
	f.mu.Unlock()
	return structpb.NewStruct(map[string]any{"draining": true, "since": since.UTC().Format(time.RFC3339)})
}

func (f *Fake) undrain(context.Context, *daemonv1.Command) (*structpb.Struct, error) {
	f.mu.Lock()
	f.draining = false
	f.mu.Unlock()
	return structpb.NewStruct(map[string]any{"draining": false})
}

func (f *Fake) configure(_ context.Context, c *daemonv1.Command) (*structpb.Struct, error) {
	data, err := ConfigJSON(c.GetConfigure().GetConfig())
	if err != nil {
		return nil, err
	}
	if f.failer.fails(command.Configure) {
		return nil, errors.New("configure: could not apply the configuration (a FakeDaemon's injected failure)")
	}
	f.mu.Lock()
	changed := !bytes.Equal(f.config, data)
	f.config = data
	f.mu.Unlock()
	return structpb.NewStruct(map[string]any{"sha256": ConfigSHA256(data), "bytes": float64(len(data)), "changed": changed})
}

func (f *Fake) exec(_ context.Context, c *daemonv1.Command) (*structpb.Struct, error) {
	path := c.GetExec().GetPath()
	if path == "" {
		return nil, errors.New(`exec: the payload needs "path", the program's absolute path`)
	}
	f.mu.Lock()
	draining, since := f.draining, f.drainedAt
	f.mu.Unlock()
	if draining {
		return nil, fmt.Errorf("draining: this node takes no new work (draining since %s; an undrain command lifts it)", since.UTC().Format(time.RFC3339))
	}
	if f.failer.fails(command.Exec) {
		out, err := structpb.NewStruct(map[string]any{"exitCode": 1, "stdout": "", "stderr": "injected failure\n"})
		if err != nil {
			return nil, err
		}
		return out, fmt.Errorf("exec %s: exit status 1", path)
	}
	stdout, stderr, code := SimulateExec(f.inventory.Load(), path, c.GetExec().GetArgs())
	out, err := structpb.NewStruct(map[string]any{"exitCode": code, "stdout": stdout, "stderr": stderr, "simulated": true})
	if err != nil || code == 0 {
		return out, err
	}
	return out, fmt.Errorf("exec %s: exit status %d", path, code)
}

// upgrade hands the command over to the next process, as bcd execs the new binary: the record
// holds the command for it, the daemon restarts as the new version (or, failing, stays away for
// the trial and comes back as the old one), and the next process reports the result once it
// holds a session. The handler returns only once its process has stopped; what it returns is
// ignored.
func (f *Fake) upgrade(ctx context.Context, gen int, c *daemonv1.Command) (*structpb.Struct, error) {
	to := c.GetUpgrade().GetVersion()
	if err := command.ValidateUpgrade(to); err != nil {
		return nil, fmt.Errorf("upgrade: %w", err)
	}
	from := f.Version()
	if to == from {
		return structpb.NewStruct(map[string]any{"version": to, "previousVersion": from})
	}
	res := &daemonv1.CommandResult{CommandId: c.GetId()}
	plan := restartPlan{version: to}
	if f.failer.fails(command.Upgrade) {
		res.Error = fmt.Sprintf("upgrade to %s failed: rolled back: the new binary held no session within %v; %s runs again and its binary was never replaced (a FakeDaemon's injected failure)",
			to, fakeUpgradeDeadline, from)
		plan = restartPlan{downtime: f.opts.RebootDowntime}
	} else {
		out, err := structpb.NewStruct(map[string]any{"version": to, "previousVersion": from})
		if err != nil {
			return nil, err
		}
		res.Success, res.Result = true, out
	}
	key := KeyOf(c)
	f.record.hold(key, gen)
	if !f.askRestart(gen, plan, &pendingFinish{afterGen: gen, key: key, result: res}) {
		f.record.unhold(key, gen)
		return nil, errors.New("upgrade: the daemon is stopping; nothing done")
	}
	select {
	case <-f.retired(gen):
	case <-ctx.Done():
	}
	return nil, errHandedOver
}

// reboot succeeds; the restart follows once the result is recorded (afterResult), as bcd reboots
// the host.
func (f *Fake) reboot(_ context.Context, c *daemonv1.Command) (*structpb.Struct, error) {
	plan := restartPlan{grace: rebootGrace, downtime: f.opts.RebootDowntime, reboot: true}
	if f.failer.fails(command.Reboot) {
		plan.downtime *= slowRebootFactor
		plan.never = f.opts.StuckReboots
	}
	f.mu.Lock()
	f.reboots[c.GetId()] = plan
	f.mu.Unlock()
	return structpb.NewStruct(map[string]any{"rebooting": true})
}
