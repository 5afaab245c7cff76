package apispec_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/better-compute/better-compute/internal/config"
	"github.com/better-compute/better-compute/internal/devmode"
)

// example is one curl example of docs/api.md.
type example struct {
	route  string
	status int
	script string
}

var exampleBlock = regexp.MustCompile("(?s)<!-- example (\\S+) (\\d+) -->\n```bash\n(.*?)```")

// readExamples finds every example of docs/api.md by its marker.
func readExamples(t *testing.T) []example {
	t.Helper()
	md, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []example
	for _, m := range exampleBlock.FindAllSubmatch(md, -1) {
		status, _ := strconv.Atoi(string(m[2]))
		out = append(out, example{route: string(m[1]), status: status, script: string(m[3])})
	}
	return out
}

// fixture makes a resource an example acts on: a POST of body (which may read other fixtures)
// whose response holds the value at path.
type fixture struct {
	route, body, path string
	// settle, when set, is polled with the fixture's value as $ID until it answers a value
	// other than pending ones: the resource has reached the state the examples expect.
	settle  *fixture
	pending []string
	// undo, when set, is called with the value as $ID after the example, so that the next
	// examples find the deployment as before (a node may be in one unfinished workflow only).
	undo *fixture
	// retry retries a refused create until it succeeds: the nodes of a cancelled workflow are
	// let go by the workers a moment after workflows/cancel answers.
	retry bool
	// restore, when set, is posted after undo with the example's fixtures (not $ID) in its body:
	// a cancelled remediation leaves its node drained, and nodes/uncordon puts it back.
	restore *fixture
}

// undoExample undoes what an example made, reading $ID from its response at path.
var undoExample = map[string]fixture{"/workflows/create": cancelWorkflow, "/leases/create": releaseLease, "/remediations/create": cancelRemediation}

// restoreExample restores what an example's undo leaves behind, with the example's fixtures.
var restoreExample = map[string]fixture{"/remediations/create": uncordonNode}

// releaseLease releases a lease, so that the nodes it holds can drain.
var releaseLease = fixture{route: "/leases/release", body: `{"id": "$ID"}`, path: "lease.id"}

// cancelRemediation cancels a remediation, so that the node can have another; one already
// ended (the example cancelled it) is refused, which changes nothing.
var cancelRemediation = fixture{route: "/remediations/cancel", body: `{"id": "$ID"}`, path: "remediation.id"}

// uncordonNode makes the example node ready again after a remediation drained it.
var uncordonNode = fixture{route: "/nodes/uncordon", body: `{"id": "$NODE_ID"}`, path: "node.id"}

// cancelWorkflow cancels a workflow and waits until it has finished.
var cancelWorkflow = fixture{
	route: "/workflows/cancel", body: `{"id": "$ID"}`, path: "workflow.id",
	settle:  &fixture{route: "/workflows/get", body: `{"id": "$ID"}`, path: "workflow.state"},
	pending: []string{"running", "paused"},
}

var fixtures = map[string]fixture{
	"POOL_ID":           {route: "/pools/create", body: `{"name": "pool-$SEQ", "nodeSelector": {"simulated": "true"}}`, path: "pool.id"},
	"LEASE_ID":          {route: "/leases/create", body: `{"poolId": "$POOL_ID", "gpus": 1, "duration": "3600s"}`, path: "lease.id", undo: &releaseLease},
	"TENANT_ID":         {route: "/iam/createTenant", body: `{"name": "tenant-$SEQ"}`, path: "tenant.id"},
	"GRANTED_TENANT_ID": {route: "/pools/grant", body: `{"poolId": "$POOL_ID", "tenantId": "$TENANT_ID", "nominal": {"gpus": {"NVIDIA A100-SXM4-80GB": 1}}}`, path: "grant.tenantId"},
	"PRINCIPAL_ID":      {route: "/iam/createPrincipal", body: `{"kind": "PRINCIPAL_KIND_SERVICE_ACCOUNT", "name": "sa-$SEQ"}`, path: "principal.id"},
	"API_KEY_ID":        {route: "/iam/createApiKey", body: `{"principalId": "$PRINCIPAL_ID", "name": "key-$SEQ"}`, path: "apiKey.id"},
	"ROLE_BINDING_ID":   {route: "/iam/createRoleBinding", body: `{"principalId": "$PRINCIPAL_ID", "role": "ROLE_VIEWER"}`, path: "roleBinding.id"},
	"JOIN_TOKEN_ID":     {route: "/joinTokens/create", body: `{"maxUses": 1}`, path: "joinToken.id"},
	"GPU_UUID":          {route: "/gpus/list", body: `{"pageSize": 1}`, path: "gpus.0.uuid"},
	"REMEDIATION_ID": {
		route: "/remediations/create", body: `{"nodeId": "$NODE_ID", "reason": "example $SEQ", "ladder": "reboot"}`, path: "remediation.id",
		undo: &cancelRemediation, retry: true, restore: &uncordonNode,
	},
	"FAN_OUT_ID": {
		route: "/commands/fanOut", body: `{"selector": {"labels": {"simulated": "true"}, "limit": 1}, "echo": {"data": {"seq": "$SEQ"}}}`, path: "fanOut.id",
	},
	"COMMAND_ID": {
		route: "/commands/create", body: `{"nodeId": "$NODE_ID", "echo": {"data": {"seq": "$SEQ"}}}`, path: "commands.0.id",
		settle:  &fixture{route: "/commands/get", body: `{"id": "$ID"}`, path: "command.state"},
		pending: []string{"COMMAND_STATE_PENDING", "COMMAND_STATE_SENT", "COMMAND_STATE_ACKED"},
	},
	"RESERVATION_ID":   {route: "/reservations/create", body: `{"poolId": "$POOL_ID", "startTime": "2031-01-01T08:00:00Z", "endTime": "2031-01-01T09:00:00Z"}`, path: "reservation.id"},
	"SECRET_NAME":      {route: "/secrets/create", body: `{"name": "secret-$SEQ", "value": "c2VjcmV0"}`, path: "secret.name"},
	"AUTH_METHOD_NAME": {route: "/authMethods/create", body: `{"authMethod": {"name": "ci-$SEQ", "kind": "AUTH_METHOD_KIND_JWT", "issuer": "https://token.actions.githubusercontent.com", "audiences": ["better-compute"]}}`, path: "authMethod.name"},
	"WEBHOOK_ID":       {route: "/webhooks/create", body: `{"url": "https://hooks.example.com/$SEQ", "eventTypes": ["node.joined"]}`, path: "webhook.id"},
	"WORKFLOW_ID": {
		route: "/workflows/create", path: "workflow.id",
		body: `{"name": "wf-$SEQ", "action": {"upgrade": {"version": "1.4.0"}}, "target": {"nodeIds": ["$NODE_ID"]}, "paused": true}`,
		undo: &cancelWorkflow, retry: true,
	},
	"DRAINED_NODE_ID": {
		route: "/nodes/drain", body: `{"id": "$SPARE_NODE_ID"}`, path: "node.id",
		settle:  &fixture{route: "/nodes/get", body: `{"id": "$ID"}`, path: "node.state"},
		pending: []string{"ready", "cordoned", "draining"},
	},
	"TUNNEL_NODE_ID": {route: "/nodes/updateSpec", body: `{"id": "$NODE_ID", "spec": {"tunnelPorts": [22]}}`, path: "node.id"},
	"TUNNEL_ID":      {route: "/tunnels/create", body: `{"nodeId": "$TUNNEL_NODE_ID", "port": 22}`, path: "tunnel.id"},
}

// TestExamplesAgainstDev runs every curl example of docs/api.md, as written, against
// `better-compute dev --sim 2`, each with fresh resources to act on, and checks the documented
// status and that the body matches the document's schema for it.
func TestExamplesAgainstDev(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("the examples need curl")
	}
	examples := readExamples(t)
	if len(examples) < 60 {
		t.Fatalf("docs/api.md has %d examples", len(examples))
	}
	spec, err := openapi3.NewLoader().LoadFromFile("../../docs/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	url, key := startDev(t)
	api := &devAPI{t: t, url: url, key: key}
	nodes := api.nodes(2)
	// The examples that take a node away (retire, revoke) run last, on the second node.
	spare := func(ex example) bool {
		return strings.Contains(ex.script, "$SPARE_NODE_ID") || strings.Contains(ex.script, "$DRAINED_NODE_ID")
	}
	sort.SliceStable(examples, func(i, j int) bool { return !spare(examples[i]) && spare(examples[j]) })
	for _, ex := range examples {
		env := map[string]string{"NODE_ID": nodes[0], "SPARE_NODE_ID": nodes[1]}
		var undo []func()
		for _, name := range fixtureNames.FindAllString(ex.script, -1) {
			undo = append(undo, api.make(env, strings.TrimPrefix(name, "$"))...)
		}
		status, body := runCurl(t, ex.script, url, key, env)
		if u, ok := undoExample[ex.route]; ok && status == http.StatusOK {
			var res any
			_ = json.Unmarshal(body, &res)
			api.undo(u, lookup(res, u.path))
			if r, ok := restoreExample[ex.route]; ok {
				api.restore(r, env)
			}
		}
		for _, u := range undo {
			u()
		}
		if status != ex.status {
			t.Errorf("%s: status %d, documented %d: %s", ex.route, status, ex.status, body)
			continue
		}
		checkBody(t, spec, ex.route, status, body)
	}
}

var fixtureNames = regexp.MustCompile(`\$[A-Z][A-Z_]*_(ID|NAME|UUID)\b`)

// runCurl runs an example's script with bash, the environment holding the API, the key and the
// fixtures, and returns the HTTP status and body of its curl.
func runCurl(t *testing.T, script, url, key string, env map[string]string) (int, []byte) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "body")
	// The example's own curl line, with its status and body caught.
	wrapped := fmt.Sprintf("curl() { command curl -o %q -w '%%{http_code}' \"$@\"; }\n%s", out, script)
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", wrapped)
	cmd.Env = append(os.Environ(), "BETTER_COMPUTE_URL="+url, "BETTER_COMPUTE_API_KEY="+key)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	status, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(status)))
	if err != nil {
		t.Fatalf("%s: status %q", script, status)
	}
	body, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return code, body
}

// checkBody validates a response against the schema the document gives it: the method's
// response message, or the Connect error.
func checkBody(t *testing.T, spec *openapi3.T, route string, status int, body []byte) {
	t.Helper()
	op := spec.Paths.Find(route)
	if op == nil || op.Post == nil {
		t.Errorf("%s: not in docs/openapi.json", route)
		return
	}
	var sc *openapi3.Schema
	if res := op.Post.Responses.Status(status); res != nil {
		sc = res.Value.Content.Get("application/json").Schema.Value
	} else {
		sc = spec.Components.Schemas["connect.Error"].Value
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Errorf("%s: %v: %s", route, err, body)
		return
	}
	if err := sc.VisitJSON(v, openapi3.EnableJSONSchema2020()); err != nil {
		t.Errorf("%s: the response does not match its schema: %v\n%s", route, err, body)
	}
}

// startDev runs dev with two simulated machines until the test ends and returns its API URL
// and admin key once both machines hold sessions.
func startDev(t *testing.T) (url, key string) {
	t.Helper()
	// Not t.TempDir: its parent is private, and PostgreSQL may run as the postgres user.
	dir, err := os.MkdirTemp("", "apispec-dev-") //nolint:usetesting // see above
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.Host, cfg.Port, cfg.Secret = "127.0.0.1", 0, strings.Repeat("ab", 32)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- devmode.Run(ctx, devmode.Options{
			Config: cfg, ClusterDir: filepath.Join(dir, "postgres"), Fresh: true, Sim: 2,
			Out: pw, Logger: slog.New(slog.DiscardHandler),
		})
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev: %v", err)
		}
		os.RemoveAll(dir)
	})
	lines := bufio.NewScanner(pr)
	deadline := time.AfterFunc(2*time.Minute, func() { pw.CloseWithError(fmt.Errorf("dev did not start in 2 minutes")) })
	defer deadline.Stop()
	for lines.Scan() {
		line := lines.Text()
		switch {
		case strings.HasPrefix(line, "API key: "):
			key = strings.TrimPrefix(line, "API key: ")
		case strings.HasPrefix(line, "API: "):
			url = strings.TrimPrefix(line, "API: ")
		case line == "Simulated machines: 2 joined":
			go func() { _, _ = io.Copy(io.Discard, pr) }()
			return url, key
		case strings.HasPrefix(line, "Simulated machines: "):
			t.Fatal(line)
		}
	}
	t.Fatalf("dev ended before its machines joined: %v", lines.Err())
	return "", ""
}

// devAPI calls the dev deployment to make the examples' fixtures.
type devAPI struct {
	t        *testing.T
	url, key string
	seq      int
}

func (a *devAPI) post(route, body string) (int, map[string]any) {
	a.t.Helper()
	req, err := http.NewRequest(http.MethodPost, a.url+route, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Better-Compute", "1")
	req.Header.Set("Authorization", "Bearer "+a.key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		a.t.Fatalf("%s: %v", route, err)
	}
	return res.StatusCode, out
}

// nodes returns the ids of the deployment's n nodes, sorted by hostname.
func (a *devAPI) nodes(n int) []string {
	_, res := a.post("/nodes/list", `{}`)
	list, _ := res["nodes"].([]any)
	var ids []string
	for _, node := range list {
		ids = append(ids, lookup(node, "id"))
	}
	if len(ids) != n {
		a.t.Fatalf("dev has %d nodes, want %d: %v", len(ids), n, res)
	}
	return ids
}

// make creates the fixture name, and first those it reads, into env, and returns what undoes
// them.
func (a *devAPI) make(env map[string]string, name string) (undo []func()) {
	a.t.Helper()
	if _, ok := env[name]; ok {
		return nil
	}
	f, ok := fixtures[name]
	if !ok {
		a.t.Fatalf("no fixture makes $%s", name)
	}
	a.seq++
	body := strings.ReplaceAll(f.body, "$SEQ", strconv.Itoa(a.seq))
	for _, dep := range fixtureNames.FindAllString(body, -1) {
		undo = append(undo, a.make(env, strings.TrimPrefix(dep, "$"))...)
		body = strings.ReplaceAll(body, dep, env[strings.TrimPrefix(dep, "$")])
	}
	status, res := a.post(f.route, body)
	for deadline := time.Now().Add(30 * time.Second); f.retry && status == http.StatusBadRequest && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond) // polling the API; nothing to wait on from here
		status, res = a.post(f.route, body)
	}
	if status != http.StatusOK {
		a.t.Fatalf("fixture %s: %s %s: %d %v", name, f.route, body, status, res)
	}
	env[name] = lookup(res, f.path)
	if f.undo != nil {
		id := env[name]
		undo = append(undo, func() { a.undo(*f.undo, id) })
	}
	if r := f.restore; r != nil {
		undo = append(undo, func() { a.restore(*r, env) })
	}
	a.settle(f, name, env[name])
	return undo
}

// lookup follows a dotted path ("commands.0.id") through decoded JSON to a string.
func lookup(v any, path string) string {
	for _, step := range strings.Split(path, ".") {
		switch x := v.(type) {
		case map[string]any:
			v = x[step]
		case []any:
			i, err := strconv.Atoi(step)
			if err != nil || i >= len(x) {
				return ""
			}
			v = x[i]
		}
	}
	s, _ := v.(string)
	return s
}

// restore posts r with the example's fixtures in its body; a 400 (nothing to restore) is fine.
func (a *devAPI) restore(r fixture, env map[string]string) {
	a.t.Helper()
	body := r.body
	for _, dep := range fixtureNames.FindAllString(body, -1) {
		body = strings.ReplaceAll(body, dep, env[strings.TrimPrefix(dep, "$")])
	}
	if status, res := a.post(r.route, body); status != http.StatusOK && status != http.StatusBadRequest {
		a.t.Errorf("restore %s %s: %d %v", r.route, body, status, res)
	}
}

// undo calls u.route with id as $ID, then waits for u to settle.
func (a *devAPI) undo(u fixture, id string) {
	a.t.Helper()
	// 400: the example itself already did it (released the lease, cancelled the workflow).
	if status, res := a.post(u.route, strings.ReplaceAll(u.body, "$ID", id)); status != http.StatusOK && status != http.StatusBadRequest {
		a.t.Errorf("undo %s %s: %d %v", u.route, id, status, res)
	}
	a.settle(u, u.route, id)
}

// settle polls f.settle with id as $ID while it answers one of f.pending.
func (a *devAPI) settle(f fixture, name, id string) {
	a.t.Helper()
	if f.settle == nil {
		return
	}
	body := strings.ReplaceAll(f.settle.body, "$ID", id)
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, res := a.post(f.settle.route, body)
		state := lookup(res, f.settle.path)
		if !slices.Contains(f.pending, state) {
			return
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("%s: still %s after 30 s", name, state)
		}
		time.Sleep(20 * time.Millisecond) // polling the API; nothing to wait on from here
	}
}
