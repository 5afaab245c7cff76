package cli

import (
	"strings"
	"testing"

	"github.com/better-compute/better-compute/internal/modules/standard"
)

// TestAPICommands checks the binary has a command for every method of every compiled-in
// module's registry, and that they join the hand-written commands without displacing any.
func TestAPICommands(t *testing.T) {
	t.Parallel()
	root := newRootCommand(standard.Modules())
	if root.PersistentPreRunE != nil {
		t.Fatal(root.PersistentPreRunE(root, nil))
	}
	reg, err := apiRegistry(standard.Modules())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.ByRoute("/eventStream/status"); !ok {
		t.Error("the events module's methods are not in the registry")
	}
	for _, m := range reg.Methods() {
		path := CommandPath(m)
		if cmd, rest, err := root.Find(path); err != nil || len(rest) > 0 || cmd.Name() != path[1] {
			t.Errorf("%s: no command %q", m.Route(), strings.Join(path, " "))
		}
	}
	root.InitDefaultCompletionCmd() // what Execute does
	for _, path := range [][]string{
		{"iam", "mint-admin-key"}, {"iam", "who-am-i"}, {"workflow", "run"}, {"workflows", "list"},
		{"tunnel"}, {"tunnels", "list"}, {"login"}, {"logout"}, {"context", "use"}, {"completion"},
	} {
		if cmd, rest, err := root.Find(path); err != nil || len(rest) > 0 || cmd.Name() != path[len(path)-1] {
			t.Errorf("no command %q", strings.Join(path, " "))
		}
	}
}
