package hello_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	compute "github.com/better-compute/better-compute"
	"github.com/better-compute/better-compute/client"
	"github.com/better-compute/better-compute/computetest"
	"github.com/better-compute/better-compute/examples/hello"
	hellov1 "github.com/better-compute/better-compute/examples/hello/gen/bettercompute/modules/hello/v1"
	"github.com/better-compute/better-compute/examples/hello/gen/bettercompute/modules/hello/v1/hellov1connect"
	"github.com/better-compute/better-compute/module"
)

// TestMain runs the tests, or, in a subprocess a test starts, the command line of this custom
// build (what cmd/better-compute's main runs).
func TestMain(m *testing.M) {
	if os.Getenv("HELLO_RUN_CLI") == "1" {
		compute.Main(modules()...)
	}
	computetest.Main(m)
}

// modules are the custom build's: the standard ones and hello.
func modules() []module.Info { return append(compute.StandardModules(), hello.Info()) }

// TestGreeting runs a deployment with the module enabled: its method is in the API, guarded and
// documented like the core's; its migration made its table; its reconciler writes the greeting.
func TestGreeting(t *testing.T) {
	t.Parallel()
	url, key := start(t)
	ctx := context.Background()
	greetings := hellov1connect.NewHelloServiceClient(http.DefaultClient, url, client.ConnectOptions(client.WithAPIKey(key))...)

	created, err := greetings.CreateGreeting(ctx, &hellov1.CreateGreetingRequest{Name: "Ada"})
	if err != nil {
		t.Fatal(err)
	}
	if created.GetGreeting().GetMessage() != "" {
		t.Fatalf("a new greeting is written by the reconciler, not the handler: %v", created)
	}
	computetest.Until(t, 30*time.Second, "the reconciler writes the greeting", func() bool {
		list, err := greetings.ListGreetings(ctx, &hellov1.ListGreetingsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		g := list.GetGreetings()
		return len(g) == 1 && g[0].GetMessage() == "Hello, Ada!"
	})

	// Bad input: InvalidArgument naming the field, and nothing stored.
	_, err = greetings.CreateGreeting(ctx, &hellov1.CreateGreetingRequest{Name: ""})
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !hasViolation(err, "name") {
		t.Fatalf("empty name: %v, want InvalidArgument naming name", err)
	}
	// The guard applies: no key, no greeting.
	anonymous := hellov1connect.NewHelloServiceClient(http.DefaultClient, url, client.ConnectOptions()...)
	if _, err := anonymous.ListGreetings(ctx, &hellov1.ListGreetingsRequest{}); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Fatalf("without a key: %v, want Unauthenticated", err)
	}
	// The module's methods are in the OpenAPI document with the core's.
	res, err := http.Get(url + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(doc), "/greetings/create") || !strings.Contains(string(doc), "/nodes/list") {
		t.Fatalf("openapi.json lacks the module's or the core's methods (%d bytes)", len(doc))
	}
}

// start runs a deployment with the hello module enabled on a fresh database until the test
// ends, and returns its API URL and an admin key.
func start(t *testing.T) (url, key string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	d, err := compute.New(ctx, compute.Config{
		DatabaseURL: computetest.DatabaseURL(t), Secret: "hello-example-secret-0123456789abcdef",
		Modules: modules(), Environ: []string{"BETTER_COMPUTE_MODULES=" + hello.Name},
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	if err := d.Migrate(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := d.Start(ctx, compute.RoleAPI, compute.RoleControllers); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := d.Wait(); err != nil {
			t.Error(err)
		}
	})
	srv := httptest.NewServer(d.Handler())
	t.Cleanup(srv.Close)
	if key, err = d.MintAdminKey(ctx, "hello-test"); err != nil {
		t.Fatal(err)
	}
	return srv.URL + "/api", key
}

func hasViolation(err error, field string) bool {
	for _, v := range client.FieldViolations(err) {
		if v.Field == field {
			return true
		}
	}
	return false
}

// TestCLI: the custom build's command line has the module's commands, which call the API like
// the core's; and buf curl reaches the method at its procedure path.
func TestCLI(t *testing.T) {
	t.Parallel()
	url, key := start(t)
	cli := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), "HELLO_RUN_CLI=1", "BETTER_COMPUTE_URL="+url, "BETTER_COMPUTE_API_KEY="+key)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("better-compute %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	if out := cli("greetings", "--help"); !strings.Contains(out, "create") || !strings.Contains(out, "list") {
		t.Fatalf("greetings --help lacks the module's commands:\n%s", out)
	}
	if out := cli("greetings", "create", "--name", "Grace"); !strings.Contains(out, "Grace") {
		t.Fatalf("greetings create:\n%s", out)
	}

	// buf curl, with the schema from the repository's proto workspace (buf.yaml at its root).
	curl := exec.Command("go", "tool", "-modfile=tools/go.mod", "buf", "curl", "--schema", ".", "--protocol", "connect",
		"-H", "Authorization: Bearer "+key, "-H", client.ClientHeader+": 1", "-d", `{"name": "Lin"}`,
		url+"/"+hellov1connect.HelloServiceCreateGreetingProcedure[1:])
	curl.Dir = "../.."
	out, err := curl.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"name": "Lin"`) {
		t.Fatalf("buf curl: %v\n%s", err, out)
	}
}
