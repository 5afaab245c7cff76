package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/command"
)

// FakeVersion is the daemon version FakeDaemons report.
const FakeVersion = "fake-0.1.0"

// Fake is a FakeDaemon: an Agent that speaks the real protocol (real key, CSR, mTLS and stream)
// with a configurable inventory and scripted command handlers, for tests, dev and the
// simulator. It opens tunnels exactly as bcd does (the Agent's code), to the ports of its
// allow list on the machine it runs on.
type Fake struct {
	*Agent
	// Runs counts handler executions per command type (a re-delivered command answered from
	// the record does not count), so tests can check exactly-once execution.
	Runs map[string]*atomic.Int64

	inventory atomic.Pointer[daemonv1.Inventory]
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
	// Handlers are added to (and override) the built-in ones: "collectInventory" returns the
	// inventory, and "echo" returns its data after waiting data.sleepSeconds when set, or fails
	// with data.fail when that is a string: the tests' slow and failing commands.
	Handlers  map[string]Handler
	ClockSkew time.Duration
	Logger    *slog.Logger
	// TunnelPorts is the FakeDaemon's tunnel allow list (Options.TunnelPorts): it opens tunnels
	// as bcd does, to those ports of 127.0.0.1 on the machine it runs on. None by default.
	TunnelPorts []int
}

// JoinFake joins with token and returns a FakeDaemon ready to Run.
func JoinFake(ctx context.Context, rootPEM []byte, token, hostname string, opts FakeOptions) (*Fake, error) {
	id, err := opts.Dialer.Join(ctx, rootPEM, token, hostname)
	if err != nil {
		return nil, err
	}
	return NewFake(id, opts)
}

// NewFake returns a FakeDaemon for an identity.
func NewFake(id *Identity, opts FakeOptions) (*Fake, error) {
	f := &Fake{Runs: map[string]*atomic.Int64{}}
	handlers := map[string]Handler{
		command.Echo: fakeEcho,
		command.CollectInventory: func(context.Context, *daemonv1.Command) (*structpb.Struct, error) {
			return inventoryStruct(f.inventory.Load())
		},
	}
	for k, h := range opts.Handlers {
		handlers[k] = h
	}
	for k, h := range handlers {
		n := new(atomic.Int64)
		f.Runs[k] = n
		handlers[k] = func(ctx context.Context, c *daemonv1.Command) (*structpb.Struct, error) {
			n.Add(1)
			return h(ctx, c)
		}
	}
	inv := opts.Inventory
	if inv == nil {
		inv = &daemonv1.Inventory{Hostname: "fake", Os: "linux", Kernel: "6.1.0-fake", CpuModel: "Fake CPU", Cpus: 8, MemoryBytes: 32 << 30}
	}
	f.inventory.Store(inv)
	a, err := NewAgent(Options{
		Dialer: opts.Dialer, Identity: id, Version: FakeVersion, Handlers: handlers,
		Inventory: func(context.Context) (*daemonv1.Inventory, error) { return f.inventory.Load(), nil },
		ClockSkew: opts.ClockSkew, Logger: opts.Logger, TunnelPorts: opts.TunnelPorts,
	})
	if err != nil {
		return nil, fmt.Errorf("fake daemon: %w", err)
	}
	f.Agent = a
	return f, nil
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
