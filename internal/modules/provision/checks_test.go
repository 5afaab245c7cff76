package provision

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	provisionmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1"
	"github.com/better-compute/better-compute/internal/doctor"
	"github.com/better-compute/better-compute/internal/pki"
	"github.com/better-compute/better-compute/internal/provision"
	"github.com/better-compute/better-compute/module"
	"github.com/better-compute/better-compute/server/servertest"
)

// heldProvider is a provider that holds a fixed list of machines and answers nothing else.
type heldProvider struct {
	provision.Provider
	held []provision.Machine
	err  error
}

func (p heldProvider) List(context.Context) ([]provision.Machine, error) { return p.held, p.err }

// TestDoctorChecks checks the providers, orphans and stuck checks against a class whose
// provider holds a resource of this deployment that no machine names, one of another
// deployment, and a machine left in a step for an hour.
func TestDoctorChecks(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	held := []provision.Machine{
		{ProviderID: "i-orphan", State: provision.ProviderRunning, Tags: map[string]string{provision.TagDeployment: "test.local", provision.TagMachine: "0194d1a0-0000-7000-8000-000000000001"}},
		{ProviderID: "i-other", State: provision.ProviderRunning, Tags: map[string]string{provision.TagDeployment: "other.example", provision.TagMachine: "x"}},
		{ProviderID: "i-gone", State: provision.ProviderGone, Tags: map[string]string{provision.TagDeployment: "test.local"}},
	}
	var failing bool
	e := newEnv(t, Providers{"held": func(json.RawMessage, []byte, provision.Egress) (provision.Provider, error) {
		if failing {
			return heldProvider{err: context.DeadlineExceeded}, nil
		}
		return heldProvider{held: held}, nil
	}})
	if _, err := pki.Init(ctx, e.Pool, servertest.Secret, "test.local"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.CreateClass(ctx, &provisionmodulev1.CreateClassRequest{Name: "racks", Provider: "held"}); err != nil {
		t.Fatal(err)
	}
	run := func(name string) doctor.Finding {
		t.Helper()
		for _, c := range e.mod.Checks(module.CheckDeps{Pool: e.Pool, Secret: servertest.Secret}) {
			if c.Name == name {
				return c.Run(ctx)
			}
		}
		t.Fatalf("no check %s", name)
		return doctor.Finding{}
	}

	if f := run("providers"); f.Severity != doctor.OK {
		t.Errorf("providers = %+v", f)
	}
	if f := run("orphans"); f.Severity != doctor.Warning || !strings.Contains(f.Cause, "i-orphan") || strings.Contains(f.Cause, "i-other") || strings.Contains(f.Cause, "i-gone") {
		t.Errorf("orphans = %+v", f)
	}
	if f := run("stuck"); f.Severity != doctor.OK {
		t.Errorf("stuck with no machine = %+v", f)
	}

	// A machine an hour in booting is stuck.
	if _, err := e.Pool.Exec(ctx, `INSERT INTO provision_machines (id, tenant_id, class, name, state, state_changed_at)
		SELECT '0194d1a0-0000-7000-8000-000000000002', tenant_id, 'racks', 'slow-one', 'booting', now() - interval '1 hour'
		FROM provision_classes WHERE name = 'racks'`); err != nil {
		t.Fatal(err)
	}
	if f := run("stuck"); f.Severity != doctor.Warning || !strings.Contains(f.Cause, "slow-one") {
		t.Errorf("stuck = %+v", f)
	}

	// A provider that does not answer is an error naming the class; without the secret, the
	// checks say they cannot run.
	failing = true
	if f := run("providers"); f.Severity != doctor.Error || !strings.Contains(f.Cause, "class racks (held)") {
		t.Errorf("providers with a failing provider = %+v", f)
	}
	for _, c := range e.mod.Checks(module.CheckDeps{Pool: e.Pool}) {
		if c.Name == "providers" {
			if f := c.Run(ctx); f.Severity != doctor.Warning || !strings.Contains(f.Cause, "secret") {
				t.Errorf("providers without the secret = %+v", f)
			}
		}
	}
}
