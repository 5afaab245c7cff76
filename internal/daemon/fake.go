package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/command"
)

// FakeVersion is the daemon version FakeDaemons report.
const FakeVersion = "fake-0.1.0"

// Fake is a FakeDaemon: an Agent that speaks the real protocol (real key, CSR, mTLS and stream)
// with a configurable inventory and scripted command handlers, for tests, dev and the
// simulator.
type Fake struct {
	*Agent
	// Runs counts handler executions per command type (a re-delivered command answered from
	// the record does not count), so tests can check exactly-once execution.
	Runs map[string]*atomic.Int64
}

// FakeOptions configure a FakeDaemon.
type FakeOptions struct {
	Dialer    Dialer
	Inventory *daemonv1.Inventory
	// Handlers are added to (and override) the built-in ones: "echo" returns its payload,
	// "sleep" waits payload.seconds, "fail" fails with payload.message.
	Handlers  map[string]Handler
	ClockSkew time.Duration
	Logger    *slog.Logger
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
		command.Echo: func(_ context.Context, p *structpb.Struct) (*structpb.Struct, error) { return p, nil },
		"sleep": func(ctx context.Context, p *structpb.Struct) (*structpb.Struct, error) {
			d := time.Duration(p.GetFields()["seconds"].GetNumberValue() * float64(time.Second))
			select {
			case <-time.After(d):
				return &structpb.Struct{}, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
		"fail": func(_ context.Context, p *structpb.Struct) (*structpb.Struct, error) {
			return nil, errors.New(p.GetFields()["message"].GetStringValue())
		},
	}
	for k, h := range opts.Handlers {
		handlers[k] = h
	}
	for k, h := range handlers {
		n := new(atomic.Int64)
		f.Runs[k] = n
		handlers[k] = func(ctx context.Context, p *structpb.Struct) (*structpb.Struct, error) {
			n.Add(1)
			return h(ctx, p)
		}
	}
	inv := opts.Inventory
	if inv == nil {
		inv = &daemonv1.Inventory{Hostname: "fake", Os: "linux", Kernel: "6.1.0-fake", CpuModel: "Fake CPU", Cpus: 8, MemoryBytes: 32 << 30}
	}
	a, err := NewAgent(Options{
		Dialer: opts.Dialer, Identity: id, Version: FakeVersion, Handlers: handlers,
		Inventory: func(context.Context) (*daemonv1.Inventory, error) { return inv, nil },
		ClockSkew: opts.ClockSkew, Logger: opts.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("fake daemon: %w", err)
	}
	f.Agent = a
	return f, nil
}
