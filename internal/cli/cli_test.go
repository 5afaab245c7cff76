package cli_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/better-compute/better-compute/gen/go/bettercompute/api/v1"
	eventsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/events/v1"
	"github.com/better-compute/better-compute/internal/cli"
	"github.com/better-compute/better-compute/internal/registry"
	"github.com/better-compute/better-compute/server/servertest"
)

// methods is the registry of every core method and the events module's.
var methods = sync.OnceValues(func() (*registry.Registry, error) {
	return registry.FromGlobal(eventsv1.File_bettercompute_modules_events_v1_events_proto)
})

// result is what one run of the command line printed and its exit code.
type result struct {
	stdout, stderr string
	code           int
}

// harness runs the command line in this process with its own configuration directory and
// environment.
type harness struct {
	t   *testing.T
	dir string
	env map[string]string
	// open receives the URLs login --sso would open in a browser; nil ignores them.
	open func(url string) error
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return &harness{t: t, dir: filepath.Join(t.TempDir(), "better-compute"), env: map[string]string{}}
}

func (h *harness) root() *cobra.Command {
	h.t.Helper()
	reg, err := methods()
	if err != nil {
		h.t.Fatal(err)
	}
	root := &cobra.Command{Use: "better-compute", SilenceUsage: true, SilenceErrors: true}
	r := &cli.Resolver{ConfigDir: h.dir, Getenv: func(k string) string { return h.env[k] }}
	open := h.open
	if open == nil {
		open = func(string) error { return nil }
	}
	if err := cli.Attach(root, reg, cli.Options{Resolver: r, OpenBrowser: open}); err != nil {
		h.t.Fatal(err)
	}
	return root
}

// run runs `better-compute args...` with stdin.
func (h *harness) runIn(stdin string, args ...string) result {
	h.t.Helper()
	root := h.root()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.ExecuteContext(h.t.Context())
	if err != nil {
		cli.PrintError(&errOut, err)
	}
	return result{stdout: out.String(), stderr: errOut.String(), code: cli.ExitCode(err)}
}

func (h *harness) run(args ...string) result { h.t.Helper(); return h.runIn("", args...) }

// ok runs args against env and fails the test unless the command succeeds.
func (h *harness) ok(env *servertest.Env, args ...string) result {
	h.t.Helper()
	r := h.run(append(args, "--api", env.URL, "--api-key", env.AdminKey)...)
	if r.code != 0 {
		h.t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// asJSON decodes a -o json answer.
func asJSON(t *testing.T, r result) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r.stdout)
	}
	return m
}

func TestEveryMethodHasACommand(t *testing.T) {
	t.Parallel()
	reg, err := methods()
	if err != nil {
		t.Fatal(err)
	}
	root := newHarness(t).root()
	sawModule := false
	for _, m := range reg.Methods() {
		path := cli.CommandPath(m)
		cmd, rest, err := root.Find(path)
		if err != nil || len(rest) > 0 || cmd.Name() != path[1] || cmd.Parent().Name() != path[0] || cmd.RunE == nil {
			t.Errorf("%s: no command %q (found %v, %v)", m.Route(), strings.Join(path, " "), cmd, err)
			continue
		}
		if cmd.Short == "" || !strings.Contains(cmd.Long, "Route: "+m.Route()) {
			t.Errorf("%s: help %q / %q", m.Route(), cmd.Short, cmd.Long)
		}
		sawModule = sawModule || m.Route() == "/eventStream/status"
	}
	if !sawModule {
		t.Error("the events module's eventStream/status has no command")
	}
	if cmd, _, err := root.Find([]string{"join-tokens", "create"}); err != nil || cmd.Flags().Lookup("max-uses") == nil || cmd.Flags().Lookup("labels") == nil {
		t.Errorf("join-tokens create has no --max-uses or --labels flag")
	}
}

func TestAgainstServer(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)

	t.Run("create from flags, list as table, JSON and YAML", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		r := h.ok(env, "join-tokens", "create", "--description", "rack 7", "--max-uses", "5", "--labels", "rack=7", "--labels", "zone=a", "-o", "json")
		jt := asJSON(t, r)["joinToken"].(map[string]any)
		if jt["maxUses"] != float64(5) || jt["description"] != "rack 7" || fmt.Sprint(jt["labels"]) != "map[rack:7 zone:a]" {
			t.Errorf("created %v", jt)
		}
		r = h.ok(env, "join-tokens", "list")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], jt["id"].(string)) {
			t.Errorf("table:\n%s", r.stdout)
		}
		r = h.ok(env, "join-tokens", "list", "-o", "json")
		if list := asJSON(t, r)["joinTokens"].([]any); len(list) != 1 || list[0].(map[string]any)["id"] != jt["id"] {
			t.Errorf("json list:\n%s", r.stdout)
		}
		r = h.ok(env, "join-tokens", "list", "-o", "yaml")
		if !strings.Contains(r.stdout, "joinTokens:\n  - id: ") || !strings.Contains(r.stdout, "description: rack 7") {
			t.Errorf("yaml list:\n%s", r.stdout)
		}
		r = h.ok(env, "iam", "who-am-i")
		if !strings.Contains(r.stdout, "principal.name:") && !strings.Contains(r.stdout, "name:") {
			t.Errorf("who-am-i table:\n%s", r.stdout)
		}
	})

	t.Run("create from --data @file, flags override", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		path := filepath.Join(t.TempDir(), "pool.json")
		if err := os.WriteFile(path, []byte(`{"name": "from-file", "description": "in the file", "tunnel_ports": [22]}`), 0o600); err != nil {
			t.Fatal(err)
		}
		r := h.ok(env, "pools", "create", "--data", "@"+path, "--description", "from the flag", "-o", "json")
		p := asJSON(t, r)["pool"].(map[string]any)
		if p["name"] != "from-file" || p["description"] != "from the flag" {
			t.Errorf("created %v", p)
		}
		r = h.ok(env, "pools", "get", "--id", p["id"].(string))
		if !strings.Contains(r.stdout, "name:") || !strings.Contains(r.stdout, "from-file") {
			t.Errorf("get as key: value lines:\n%s", r.stdout)
		}
		r = h.runIn(`{"name": "from-stdin"}`, "pools", "create", "--data", "@-", "--api", env.URL, "--api-key", env.AdminKey, "-o", "json")
		if r.code != 0 || asJSON(t, r)["pool"].(map[string]any)["name"] != "from-stdin" {
			t.Errorf("create from stdin: %d %s %s", r.code, r.stdout, r.stderr)
		}
	})

	t.Run("field violation", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		r := h.run("iam", "get-principal", "--id", "nope", "--api", env.URL, "--api-key", env.AdminKey)
		if r.code != cli.ExitRefused || !strings.Contains(r.stderr, "error: invalid_argument: ") || !strings.Contains(r.stderr, "\n  id: must be a UUID, got \"nope\"\n") {
			t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
		}
	})

	t.Run("wrong key", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		r := h.run("iam", "who-am-i", "--api", env.URL, "--api-key", "bck_nope_nope")
		if r.code != cli.ExitAuth || !strings.HasPrefix(r.stderr, "error: unauthenticated: ") {
			t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
		}
	})

	t.Run("not found", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		r := h.run("pools", "get", "--id", "00000000-0000-4000-8000-000000000000", "--api", env.URL, "--api-key", env.AdminKey)
		if r.code != cli.ExitNotFound {
			t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
		}
	})

	t.Run("usage errors send nothing", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t)
		for _, args := range [][]string{
			{"pools", "create", "--data", `{"poolName": "typo"}`},
			{"join-tokens", "create", "--max-uses", "many"},
			{"pools", "list", "-o", "xml"},
			{"principals-typo-free", "--data", "{"},
		} {
			r := h.run(append(args, "--api", env.URL, "--api-key", env.AdminKey)...)
			want := cli.ExitUsage
			if args[0] == "principals-typo-free" {
				want = cli.ExitOther // an unknown command is cobra's error
			}
			if r.code != want {
				t.Errorf("%v: exit %d, want %d; stderr %s", args, r.code, want, r.stderr)
			}
			if args[0] == "pools" && args[2] == "--data" && !strings.Contains(r.stderr, "poolName") {
				t.Errorf("%v: stderr does not name the field: %s", args, r.stderr)
			}
		}
	})
}

func TestAllFollowsPages(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	h := newHarness(t)
	for i := range 5 {
		h.ok(env, "pools", "create", "--name", fmt.Sprintf("paged-%d", i))
	}
	r := h.ok(env, "pools", "list", "--page-size", "2")
	if rows := strings.Count(strings.TrimSpace(r.stdout), "\n"); rows != 2 || !strings.Contains(r.stderr, "--all") {
		t.Errorf("one page: %d rows, stderr %q\n%s", rows, r.stderr, r.stdout)
	}
	r = h.ok(env, "pools", "list", "--page-size", "2", "--all", "-o", "json")
	got := asJSON(t, r)
	if list := got["pools"].([]any); len(list) != 5 || got["nextPageToken"] != nil {
		t.Errorf("--all: %d pools, next %v", len(list), got["nextPageToken"])
	}
}

func TestContexts(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	h := newHarness(t)
	if r := h.run("login", "--api", env.URL, "--api-key", "bck_nope_nope"); r.code != cli.ExitAuth {
		t.Fatalf("login with a wrong key: exit %d %s", r.code, r.stderr)
	}
	if r := h.run("login", "--api", env.URL, "--api-key", env.AdminKey, "--context", "prod"); r.code != 0 || !strings.Contains(r.stdout, `context "prod" is current`) {
		t.Fatalf("login: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	for path, want := range map[string]os.FileMode{h.dir: 0o700, filepath.Join(h.dir, "contexts.yaml"): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, mode %v, want %v", path, err, fi.Mode().Perm(), want)
		}
	}
	// The current context is used without flags.
	if r := h.run("iam", "who-am-i", "-o", "json"); r.code != 0 {
		t.Fatalf("who-am-i from the context: exit %d %s", r.code, r.stderr)
	}
	// A second context, a wrong key, made current.
	cs, err := cli.LoadContexts(h.dir)
	if err != nil {
		t.Fatal(err)
	}
	cs.Put(cli.Context{Name: "bad", API: env.URL, APIKey: "bck_nope_nope"})
	if err := cli.SaveContexts(h.dir, cs); err != nil {
		t.Fatal(err)
	}
	if r := h.run("context", "use", "bad"); r.code != 0 {
		t.Fatalf("context use: %d %s", r.code, r.stderr)
	}
	if r := h.run("context", "list"); !strings.Contains(r.stdout, "*         bad") && !strings.Contains(r.stdout, "*   ") {
		t.Errorf("context list:\n%s", r.stdout)
	}
	if r := h.run("iam", "who-am-i"); r.code != cli.ExitAuth {
		t.Errorf("with the bad context: exit %d", r.code)
	}
	// --context picks another; the environment overrides the context; flags override both.
	if r := h.run("iam", "who-am-i", "--context", "prod"); r.code != 0 {
		t.Errorf("--context prod: exit %d %s", r.code, r.stderr)
	}
	if r := h.run("iam", "who-am-i", "--context", "nope"); r.code != cli.ExitUsage {
		t.Errorf("--context nope: exit %d %s", r.code, r.stderr)
	}
	h.env[cli.EnvAPIKey] = env.AdminKey
	if r := h.run("iam", "who-am-i"); r.code != 0 {
		t.Errorf("key from the environment over the context: exit %d %s", r.code, r.stderr)
	}
	if r := h.run("iam", "who-am-i", "--api-key", "bck_nope_nope"); r.code != cli.ExitAuth {
		t.Errorf("--api-key over the environment: exit %d", r.code)
	}
	h.env[cli.EnvURL] = "http://127.0.0.1:1/api"
	if r := h.run("iam", "who-am-i", "--api", env.URL); r.code != 0 {
		t.Errorf("--api over the environment: exit %d %s", r.code, r.stderr)
	}
	delete(h.env, cli.EnvURL)
	delete(h.env, cli.EnvAPIKey)
	if r := h.run("logout"); r.code != 0 {
		t.Errorf("logout: %d %s", r.code, r.stderr)
	}
	cs, err = cli.LoadContexts(h.dir)
	if err != nil || len(cs.Contexts) != 1 || cs.Current != "" {
		t.Errorf("after logout: %+v, %v", cs, err)
	}
	if r := h.run("iam", "who-am-i"); r.code != cli.ExitUsage || !strings.Contains(r.stderr, "login") {
		t.Errorf("without a context: exit %d %s", r.code, r.stderr)
	}
}

// TestTableColumnsExist checks every (bettercompute.api.v1.table) column names a field path of
// its message, so a renamed field cannot leave an empty column.
func TestTableColumnsExist(t *testing.T) {
	t.Parallel()
	reg, err := methods()
	if err != nil {
		t.Fatal(err)
	}
	tables := 0
	for _, m := range reg.Methods() {
		fields := m.Descriptor.Output().Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			if !fd.IsList() || fd.Message() == nil {
				continue
			}
			tb, ok := proto.GetExtension(fd.Message().Options(), apiv1.E_Table).(*apiv1.Table)
			if !ok || len(tb.GetColumns()) == 0 {
				continue
			}
			tables++
			for _, col := range tb.GetColumns() {
				md := fd.Message()
				for name := range strings.SplitSeq(col, ".") {
					f := md.Fields().ByJSONName(name)
					if f == nil {
						t.Errorf("%s: column %q: no field %q", fd.Message().FullName(), col, name)
						break
					}
					md = f.Message()
				}
			}
		}
	}
	if tables == 0 {
		t.Error("no message has a table option")
	}
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	h := newHarness(t)
	p := asJSON(t, h.ok(env, "pools", "create", "--name", "gpu-a", "-o", "json"))["pool"].(map[string]any)
	h.env[cli.EnvURL], h.env[cli.EnvAPIKey] = env.URL, env.AdminKey
	for _, args := range [][]string{
		{"__complete", "leases", "create", "--pool-id", ""},
		{"__complete", "pools", "get", "--id", ""},
	} {
		r := h.run(args...)
		if !strings.Contains(r.stdout, p["id"].(string)+"\tgpu-a\n") {
			t.Errorf("%v:\n%s%s", args, r.stdout, r.stderr)
		}
	}
	if r := h.run("__complete", "iam", "create-principal", "--kind", ""); !strings.Contains(r.stdout, "service_account\n") {
		t.Errorf("enum completion:\n%s", r.stdout)
	}
}
