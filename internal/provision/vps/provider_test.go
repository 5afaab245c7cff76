package vps

import (
	"errors"
	"testing"

	"github.com/google/uuid"

	"github.com/better-compute/better-compute/internal/provision"
)

func TestMain(m *testing.M) { dbtestMain(m) }

// TestProviderContract runs the provider against moto: Create launches one instance with the
// tags and the user data that installs bcd and joins, and a second Create with the same client
// token answers with it; Get, Power and List see it; Delete terminates it, twice without error;
// afterwards Get and Power say not found, List leaves it out, and Create with its token answers
// with the terminated instance rather than launching another.
func TestProviderContract(t *testing.T) {
	t.Parallel()
	params := testParams(t, startMoto(t))
	p := newProvider(t, params)
	ctx := t.Context()
	id := uuid.NewString()
	req := testRequest(id, "test.local")

	a, err := p.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if a.ProviderID == "" || a.Tags[provision.TagMachine] != id || a.Tags[provision.TagDeployment] != "test.local" ||
		a.Tags["Name"] != req.Name || a.Tags["team"] != "infra" {
		t.Fatalf("created %+v: want an instance with the machine's, the deployment's, Name and the class's tags", a)
	}
	b, err := p.Create(ctx, req)
	if err != nil || b.ProviderID != a.ProviderID {
		t.Fatalf("second Create: %+v, %v; want instance %s", b, err, a.ProviderID)
	}
	ud, err := userDataOf(ctx, p, a.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	bt, err := parseBoot(ud)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkBoot(bt, params, req); err != nil {
		t.Fatal(err)
	}

	m, err := p.Get(ctx, a.ProviderID)
	if err != nil || m.State != provision.ProviderRunning || len(m.Addresses) == 0 {
		t.Fatalf("Get: %+v, %v; want running with an address", m, err)
	}
	if err := p.Power(ctx, a.ProviderID, provision.PowerOff); err != nil {
		t.Fatal(err)
	}
	if m, err := p.Get(ctx, a.ProviderID); err != nil || m.State != provision.ProviderStopped {
		t.Fatalf("after power off: %+v, %v", m, err)
	}
	if err := p.Power(ctx, a.ProviderID, provision.PowerReset); err != nil { // starts a stopped instance
		t.Fatal(err)
	}
	if m, err := p.Get(ctx, a.ProviderID); err != nil || m.State != provision.ProviderRunning {
		t.Fatalf("after reset: %+v, %v", m, err)
	}
	if err := p.Power(ctx, a.ProviderID, provision.PowerReset); err != nil {
		t.Fatal(err)
	}
	if l, err := p.List(ctx); err != nil || len(l) != 1 || l[0].ProviderID != a.ProviderID {
		t.Fatalf("List: %+v, %v", l, err)
	}

	for range 2 {
		if err := p.Delete(ctx, a.ProviderID); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Delete(ctx, "i-0123456789abcdef0"); err != nil {
		t.Fatalf("Delete of an unknown instance: %v", err)
	}
	if _, err := p.Get(ctx, a.ProviderID); !errors.Is(err, provision.ErrNotFound) {
		t.Fatalf("Get of a terminated instance: %v", err)
	}
	if _, err := p.Get(ctx, "i-0123456789abcdef0"); !errors.Is(err, provision.ErrNotFound) {
		t.Fatalf("Get of an unknown instance: %v", err)
	}
	if err := p.Power(ctx, a.ProviderID, provision.PowerOn); !errors.Is(err, provision.ErrNotFound) {
		t.Fatalf("Power of a terminated instance: %v", err)
	}
	if l, err := p.List(ctx); err != nil || len(l) != 0 {
		t.Fatalf("List after delete: %+v, %v", l, err)
	}
	c, err := p.Create(ctx, req)
	if err != nil || c.ProviderID != a.ProviderID || c.State != provision.ProviderGone {
		t.Fatalf("Create with a terminated instance's token: %+v, %v; want that instance, gone", c, err)
	}
}

// TestListByDeployment: List shows the instances the control plane made (tagged with a
// deployment) with their deployment's tag, and none that it did not make.
func TestListByDeployment(t *testing.T) {
	t.Parallel()
	endpoint := startMoto(t)
	p := newProvider(t, testParams(t, endpoint))
	ctx := t.Context()
	mine, err := p.Create(ctx, testRequest(uuid.NewString(), "mine.local"))
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := p.Create(ctx, testRequest(uuid.NewString(), "theirs.local"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.ec2.RunInstances(ctx, untaggedInstance()); err != nil {
		t.Fatal(err)
	}
	l, err := p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range l {
		got[m.ProviderID] = m.Tags[provision.TagDeployment]
	}
	if len(got) != 2 || got[mine.ProviderID] != "mine.local" || got[theirs.ProviderID] != "theirs.local" {
		t.Fatalf("List: %v; want %s (mine.local) and %s (theirs.local), not the untagged instance", got, mine.ProviderID, theirs.ProviderID)
	}
}

// TestErrors: refusals are permanent, unknown instances not found, and an unreachable endpoint
// is retried.
func TestErrors(t *testing.T) {
	t.Parallel()
	endpoint := startMoto(t)
	params := testParams(t, endpoint)
	params.SubnetID = "subnet-00000000000000000"
	p := newProvider(t, params)
	_, err := p.Create(t.Context(), testRequest(uuid.NewString(), "test.local"))
	if err == nil || !provision.IsPermanent(err) {
		t.Fatalf("Create in an unknown subnet: %v; want a permanent error", err)
	}
	t.Logf("Create in an unknown subnet: %v", err)
	req := testRequest(uuid.NewString(), "test.local")
	req.Join.Token = ""
	if _, err := p.Create(t.Context(), req); !provision.IsPermanent(err) {
		t.Fatalf("Create without a token: %v; want a permanent error", err)
	}

	params = testParams(t, "http://127.0.0.1:1")
	p = newProvider(t, params)
	if _, err := p.List(t.Context()); err == nil || provision.IsPermanent(err) {
		t.Fatalf("List at an unreachable endpoint: %v; want a retryable error", err)
	}
}
