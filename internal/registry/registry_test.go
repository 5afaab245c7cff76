package registry_test

import (
	"testing"

	_ "github.com/better-compute/better-compute/gen/go/bettercompute/system/v1"
	"github.com/better-compute/better-compute/internal/registry"
)

func TestRegistryFromDescriptors(t *testing.T) {
	t.Parallel()
	r, err := registry.FromGlobal()
	if err != nil {
		t.Fatal(err)
	}
	m, ok := r.ByRoute("/system/info")
	if !ok {
		t.Fatal("no /system/info route")
	}
	if m.Procedure != "/bettercompute.system.v1.SystemService/Info" || !m.Public {
		t.Errorf("system/info = %+v", m)
	}
	if got, ok := r.ByProcedure(m.Procedure); !ok || got != m {
		t.Errorf("ByProcedure(%s) = %v, %v", m.Procedure, got, ok)
	}
}
