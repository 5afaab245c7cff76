package command_test

import (
	"slices"
	"testing"

	"github.com/better-compute/better-compute/internal/command"
)

func TestKnown(t *testing.T) {
	t.Parallel()
	types := command.Types()
	if !slices.IsSorted(types) {
		t.Fatalf("Types() is not sorted: %v", types)
	}
	for _, typ := range []string{command.Exec, command.CollectInventory, command.Drain, command.Undrain,
		command.Upgrade, command.Reboot, command.Configure, command.Echo} {
		if !command.Known(typ) || !slices.Contains(types, typ) {
			t.Errorf("%q is not known", typ)
		}
	}
	for _, typ := range []string{"", "Exec", "exec ", " exec", "exec\x00", "ex\x01ec", "\xff\xfe", "uncordon", "sleep"} {
		if command.Known(typ) {
			t.Errorf("%q is known", typ)
		}
	}
	types[0] = "mutated"
	if command.Known("mutated") {
		t.Error("Types() shares its slice")
	}
}
