package provision

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/better-compute/better-compute/module"
)

// TestConfigValidate: each problem names its key; the defaults with a provider the binary has
// pass.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	good := DefaultConfig()
	good.Providers = []string{"sim"}
	if err := good.Validate([]string{"sim"}); err != nil {
		t.Fatal(err)
	}
	if good.AllowPrivateEndpoints {
		t.Fatal("private provider endpoints are allowed by default")
	}
	bad := Config{Providers: []string{"ec2", "sim", "sim"}, GatewayEndpoint: "nohost", BootTimeout: time.Second, PollInterval: time.Hour}
	err := bad.Validate([]string{"sim"})
	var keys []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		fe, ok := errors.AsType[*module.FieldError](e)
		if !ok {
			t.Fatalf("%v is not a FieldError", e)
		}
		keys = append(keys, fe.Key)
	}
	want := []string{"providers[0]", "providers[2]", "gatewayEndpoint", "bootTimeout", "maxMachinesPerTenant", "pollInterval"}
	if !slices.Equal(keys, want) {
		t.Fatalf("keys %v, want %v", keys, want)
	}
	if err := (&Config{BootTimeout: time.Hour, MaxMachinesPerTenant: 1, PollInterval: time.Second}).Validate([]string{"sim"}); err == nil {
		t.Fatal("no provider enabled: accepted")
	}
}
