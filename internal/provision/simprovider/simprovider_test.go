package simprovider

import (
	"errors"
	"testing"

	"github.com/better-compute/better-compute/internal/provision"
)

// TestProviderContract: Create is idempotent by client token, Get and Power refuse a machine
// that is gone with ErrNotFound, Delete of a gone or unknown machine succeeds, and List leaves
// gone machines out. (The join itself is tested end to end with a gateway in the provision
// module's tests.)
func TestProviderContract(t *testing.T) {
	t.Parallel()
	cloud := New(Options{})
	t.Cleanup(cloud.Close)
	p, err := cloud.Factory([]byte(`{"bootDelay": "9m"}`), nil, provision.Egress{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	req := provision.CreateRequest{
		ClientToken: "m-1", Name: "m1", Tags: map[string]string{provision.TagMachine: "m-1"},
		Join: provision.Join{Token: "bcj_x_y", Gateway: "127.0.0.1:1"},
	}
	a, err := p.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Create(ctx, req)
	if err != nil || b.ProviderID != a.ProviderID || cloud.Creates() != 1 {
		t.Fatalf("second Create: %+v, %v; %d creates", b, err, cloud.Creates())
	}
	if a.State != provision.ProviderPending || a.Tags[provision.TagMachine] != "m-1" {
		t.Fatalf("machine %+v: want pending with its tag", a)
	}
	if err := p.Power(ctx, a.ProviderID, provision.PowerReset); err != nil {
		t.Fatal(err)
	}
	if err := p.Power(ctx, a.ProviderID, provision.PowerOff); err != nil {
		t.Fatal(err)
	}
	if m, err := p.Get(ctx, a.ProviderID); err != nil || m.State != provision.ProviderStopped {
		t.Fatalf("after power off: %+v, %v", m, err)
	}
	if l, err := p.List(ctx); err != nil || len(l) != 1 {
		t.Fatalf("List: %+v, %v", l, err)
	}
	for range 2 {
		if err := p.Delete(ctx, a.ProviderID); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Delete(ctx, "sim-unknown"); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Get(ctx, a.ProviderID); !errors.Is(err, provision.ErrNotFound) {
		t.Fatalf("Get of a deleted machine: %v", err)
	}
	if err := p.Power(ctx, a.ProviderID, provision.PowerOn); !errors.Is(err, provision.ErrNotFound) {
		t.Fatalf("Power of a deleted machine: %v", err)
	}
	if l, err := p.List(ctx); err != nil || len(l) != 0 {
		t.Fatalf("List after delete: %+v, %v", l, err)
	}
	if c, err := p.Create(ctx, req); err != nil || c.State != provision.ProviderGone || cloud.Creates() != 1 {
		t.Fatalf("Create with a deleted machine's token: %+v, %v (the token's machine, gone, like EC2)", c, err)
	}
}

// TestFactoryRefuses: unknown parameters, bad delays and credentials are refused.
func TestFactoryRefuses(t *testing.T) {
	t.Parallel()
	cloud := New(Options{})
	for _, tc := range []struct {
		params string
		creds  []byte
	}{
		{`{"bogus": 1}`, nil}, {`{"bootDelay": "-1s"}`, nil}, {`{"bootDelay": "11m"}`, nil}, {`{}`, []byte("x")},
	} {
		if _, err := cloud.Factory([]byte(tc.params), tc.creds, provision.Egress{}); err == nil {
			t.Fatalf("%s with %d bytes of credentials: accepted", tc.params, len(tc.creds))
		}
	}
}
