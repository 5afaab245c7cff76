package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestTunnels: the defaults are internal/tunnelhop's, the example configuration shows them, and
// the file and the environment set them.
func TestTunnels(t *testing.T) {
	t.Parallel()
	want := Tunnels{IdleTimeout: time.Hour, PerNode: 256, PerTenant: 1024}
	if d := Default().Tunnels; d != want {
		t.Errorf("default tunnels %+v, want %+v", d, want)
	}
	c, err := Load("../../better-compute.example.yaml", withSecret("BETTER_COMPUTE_DATABASE_URL=postgres://bc@db.internal/bc"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Tunnels != want {
		t.Errorf("example tunnels %+v, want the defaults %+v", c.Tunnels, want)
	}
	c, err = load(t, "tunnels:\n  idleTimeout: 10m\n  perNode: 8\n", withSecret("BETTER_COMPUTE_TUNNELS_PER_TENANT=16"))
	if err != nil {
		t.Fatal(err)
	}
	if got := (Tunnels{IdleTimeout: 10 * time.Minute, PerNode: 8, PerTenant: 16}); c.Tunnels != got {
		t.Errorf("tunnels = %+v, want %+v", c.Tunnels, got)
	}
}

func TestTunnelsValidation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, yaml string
		key, want  string
	}{
		{"idle zero", "tunnels: {idleTimeout: 0s}", "tunnels.idleTimeout", "must be from 1s to 168h0m0s, got 0s"},
		{"idle too long", "tunnels: {idleTimeout: 200h}", "tunnels.idleTimeout", "got 200h0m0s"},
		{"per node zero", "tunnels: {perNode: 0}", "tunnels.perNode", "must be from 1 to 100000, got 0"},
		{"per tenant huge", "tunnels: {perTenant: 2000000}", "tunnels.perTenant", "must be from 1 to 1000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := load(t, tc.yaml, withSecret())
			if err == nil {
				t.Fatal("loaded, want an error")
			}
			if keys := problemKeys(t, err); !slices.Equal(keys, []string{tc.key}) {
				t.Errorf("problem keys %q, want [%q]; error: %v", keys, tc.key, err)
			}
			if !strings.Contains(err.Error(), tc.key+": ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q and %q", err, tc.key+": ", tc.want)
			}
		})
	}
}
