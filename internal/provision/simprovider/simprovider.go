// Package simprovider is the "sim" provider: machines that are FakeDaemons in this process,
// for dev and tests. A machine boots after its class's boot delay by joining the gateway with
// the join token it was created with, then runs a FakeDaemon (the real protocol, a simulated
// host) until it is powered off or deleted. Like a cloud account, a Cloud keeps its machines
// across the controllers that use it, and Create is idempotent by ClientToken for as long as the
// Cloud lives, deleted machines included (as EC2's client tokens are).
package simprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/better-compute/better-compute/internal/provision"
)

// Kind is the provider's kind in the provision module's configuration and in classes.
const Kind = "sim"

// MaxBootDelay bounds a class's boot delay.
const MaxBootDelay = 10 * time.Minute

// Params are a sim class's parameters.
type Params struct {
	// BootDelay is how long a machine takes from Create (or a power on) to its daemon starting
	// to join, as a Go duration ("2s"); 0 by default.
	BootDelay string `json:"bootDelay"`
}

// Options configure a Cloud.
type Options struct {
	Logger *slog.Logger
}

// Cloud is the sim provider's account: every machine the sim classes of this process made.
type Cloud struct {
	log *slog.Logger

	mu       sync.Mutex
	seq      int
	machines map[string]*vm    // by provider id
	byToken  map[string]string // client token → provider id
	creates  int               // Creates that made a machine, for tests
	closed   bool
}

// New returns an empty Cloud.
func New(opts Options) *Cloud {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Cloud{log: log, machines: map[string]*vm{}, byToken: map[string]string{}}
}

// Factory makes a sim class's provider: its parameters are Params (unknown keys are refused);
// credentials must be empty, since there is nothing to authenticate to. The sim reaches no
// endpoint, so egress does not apply.
func (c *Cloud) Factory(params json.RawMessage, credentials []byte, _ provision.Egress) (provision.Provider, error) {
	var p Params
	if len(params) > 0 {
		dec := json.NewDecoder(bytes.NewReader(params))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("sim parameters: %w", err)
		}
	}
	var delay time.Duration
	if p.BootDelay != "" {
		d, err := time.ParseDuration(p.BootDelay)
		if err != nil || d < 0 || d > MaxBootDelay {
			return nil, fmt.Errorf("sim parameters: bootDelay must be a duration from 0 to %s, for example 2s", MaxBootDelay)
		}
		delay = d
	}
	if len(credentials) > 0 {
		return nil, errors.New("sim classes take no credentials")
	}
	return &provider{cloud: c, bootDelay: delay}, nil
}

// Creates counts the Creates that made a new machine (not those answered for a known token).
func (c *Cloud) Creates() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.creates
}

// All lists every machine the Cloud made, gone ones too, by provider id.
func (c *Cloud) All() []provision.Machine {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]provision.Machine, 0, len(c.machines))
	for _, id := range slices.Sorted(maps.Keys(c.machines)) {
		out = append(out, c.machines[id].machine())
	}
	return out
}

// Close stops every machine's daemon, as if the account's machines all lost power; the Cloud
// makes no machines after it.
func (c *Cloud) Close() {
	c.mu.Lock()
	c.closed = true
	vms := slices.Collect(maps.Values(c.machines))
	c.mu.Unlock()
	for _, v := range vms {
		v.halt()
	}
}

// provider is a sim class's view of the Cloud.
type provider struct {
	cloud     *Cloud
	bootDelay time.Duration
}

var _ provision.Provider = (*provider)(nil)

// Create makes a machine that boots after the boot delay, or returns the one made for the
// client token before.
func (p *provider) Create(_ context.Context, req provision.CreateRequest) (provision.Machine, error) {
	if req.ClientToken == "" {
		return provision.Machine{}, provision.Permanent(errors.New("sim: a client token is required"))
	}
	if req.Join.Token == "" || req.Join.Gateway == "" {
		return provision.Machine{}, provision.Permanent(errors.New("sim: the join token and the gateway are required"))
	}
	c := p.cloud
	c.mu.Lock()
	if id, ok := c.byToken[req.ClientToken]; ok {
		m := c.machines[id].machine()
		c.mu.Unlock()
		return m, nil
	}
	if c.closed {
		c.mu.Unlock()
		return provision.Machine{}, errors.New("sim: the cloud is closed")
	}
	c.seq++
	c.creates++
	v := &vm{
		id: fmt.Sprintf("sim-%06d", c.seq), name: req.Name, tags: maps.Clone(req.Tags), join: req.Join,
		bootDelay: p.bootDelay, state: provision.ProviderPending, log: c.log,
	}
	c.machines[v.id], c.byToken[req.ClientToken] = v, v.id
	c.mu.Unlock()
	v.powerOn()
	return v.machine(), nil
}

// Get returns a machine that is not gone.
func (p *provider) Get(_ context.Context, providerID string) (provision.Machine, error) {
	v, err := p.cloud.get(providerID)
	if err != nil {
		return provision.Machine{}, err
	}
	return v.machine(), nil
}

// Power turns a machine's daemon on or off, or restarts it (a reset).
func (p *provider) Power(_ context.Context, providerID string, action provision.PowerAction) error {
	v, err := p.cloud.get(providerID)
	if err != nil {
		return err
	}
	switch action {
	case provision.PowerOn:
		v.powerOn()
	case provision.PowerOff:
		v.halt()
		v.setState(provision.ProviderStopped)
	case provision.PowerReset:
		v.halt()
		v.powerOn()
	default:
		return provision.Permanent(fmt.Errorf("sim: unknown power action %q", action))
	}
	return nil
}

// Delete stops the machine's daemon for good; deleting a gone or unknown machine succeeds.
func (p *provider) Delete(_ context.Context, providerID string) error {
	p.cloud.mu.Lock()
	v, ok := p.cloud.machines[providerID]
	p.cloud.mu.Unlock()
	if !ok {
		return nil
	}
	v.halt()
	v.setState(provision.ProviderGone)
	return nil
}

// List lists the machines that are not gone.
func (p *provider) List(context.Context) ([]provision.Machine, error) {
	var out []provision.Machine
	for _, m := range p.cloud.All() {
		if m.State != provision.ProviderGone {
			out = append(out, m)
		}
	}
	return out, nil
}

func (c *Cloud) get(id string) (*vm, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.machines[id]
	if !ok || v.machine().State == provision.ProviderGone {
		return nil, fmt.Errorf("sim: machine %s: %w", id, provision.ErrNotFound)
	}
	return v, nil
}

var (
	defaultOnce  sync.Once
	defaultCloud *Cloud
)

// Default is the process's Cloud, which a binary registers with the provision module (its
// machines live as long as the process).
func Default() *Cloud {
	defaultOnce.Do(func() { defaultCloud = New(Options{}) })
	return defaultCloud
}
