package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/better-compute/better-compute/internal/page"
	"github.com/better-compute/better-compute/internal/registry"
	"github.com/better-compute/better-compute/server/internal/gpus"
	"github.com/better-compute/better-compute/server/servertest"
)

// boundedWithoutPages are the methods that answer a list without pages, each with what bounds
// it. A method added with a repeated response field must page or be listed here with its bound.
var boundedWithoutPages = map[string]string{
	"/auth/loginMethods":     "a tenant's auth methods, at most authmethods.MaxPerTenant",
	"/authMethods/list":      "a tenant's auth methods, at most authmethods.MaxPerTenant",
	"/commands/create":       "the commands it created, one per node of its request (bounded there)",
	"/commands/getFanOut":    "a fan-out's first failures, at most commands.MaxFanOutFailures",
	"/gpus/get":              "a GPU's history, at most gpus.MaxHistorySize entries (history_size)",
	"/gpus/summary":          "counts by GPU model and health and by health reason: a few each (an aggregate)",
	"/iam/createRoleBinding": "the principal's API keys it revoked, at most rateLimits.tenant.apiKeys",
	"/iam/whoAmI":            "the caller's roles, a handful",
	"/nodes/summary":         "node states and GPU models, a few each (an aggregate; nodes are capped by rateLimits.tenant.nodes)",
	"/usage/query":           "totals at most usage.MaxTotalRows (refused beyond), hours at most 10,000; expensive",
	"/usage/utilization":     "at most usage.MaxPoints points (a period of more steps is refused); expensive",
	"/workflows/get":         "a workflow's nodes, at most workflow.MaxNodes",
}

// ownPageCaps are the paged methods whose API documents a cap other than page.MaxSize.
var ownPageCaps = map[string]int{
	"/gpus/list": gpus.MaxPageSize,
}

// TestEveryListHasAPageCap walks the method registry: every method that answers a list pages it
// (page_size in, next_page_token out) or is in boundedWithoutPages, and every paged method called
// with page_size 1,000,000 caps it (at most page.MaxSize items, or its own cap in ownPageCaps) or
// refuses it, never failing inside. audit/list, with more rows than a page, shows the cap.
func TestEveryListHasAPageCap(t *testing.T) {
	t.Parallel()
	env := servertest.New(t)
	reg, err := registry.FromGlobal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Pool.Exec(ctx, `
		INSERT INTO audit_events (tenant_id, method, target, outcome, request_id)
		SELECT (SELECT tenant_id FROM principals WHERE name = 'admin' LIMIT 1), 'test/fill', '', 'ok', 'r' || i
		FROM generate_series(1, $1::integer) AS i`, page.MaxSize+100); err != nil {
		t.Fatal(err)
	}
	var checked []string
	for _, m := range reg.Methods() {
		in, out := m.Descriptor.Input(), m.Descriptor.Output()
		var lists []protoreflect.FieldDescriptor
		for i := range out.Fields().Len() {
			if f := out.Fields().Get(i); f.IsList() || f.IsMap() {
				lists = append(lists, f)
			}
		}
		paged := in.Fields().ByName("page_size") != nil
		if paged && (in.Fields().ByName("page_token") == nil || out.Fields().ByName("next_page_token") == nil) {
			t.Errorf("%s takes page_size but not page_token, or answers no next_page_token", m.Route())
		}
		if !paged {
			if _, ok := boundedWithoutPages[m.Route()]; len(lists) > 0 && !ok {
				t.Errorf("%s answers a list (%s) without pages and is not in boundedWithoutPages", m.Route(), lists[0].Name())
			}
			continue
		}
		checked = append(checked, m.Route())
		status, body := callJSON(t, env, m.Route(), `{"pageSize": 1000000}`)
		if status == http.StatusOK {
			for _, f := range lists {
				items, _ := body[f.JSONName()].([]any)
				if most, ok := ownPageCaps[m.Route()]; (ok && len(items) > most) || (!ok && len(items) > page.MaxSize) {
					t.Errorf("%s with page_size 1,000,000: %d %s", m.Route(), len(items), f.JSONName())
				}
				if m.Route() == "/audit/list" && (len(items) != page.MaxSize || body["nextPageToken"] == nil) {
					t.Errorf("audit/list with page_size 1,000,000 over %d rows: %d events, next %v", page.MaxSize+100, len(items), body["nextPageToken"])
				}
			}
			continue
		}
		switch code, _ := body["code"].(string); code {
		case "invalid_argument", "failed_precondition", "not_found":
			// A required field is missing, or the size refused: either way nothing was read.
		default:
			t.Errorf("%s with page_size 1,000,000: HTTP %d, %v", m.Route(), status, body)
		}
	}
	t.Logf("paged methods called with page_size 1,000,000: %s", strings.Join(checked, " "))
}

// callJSON posts body to a method's short route as the admin and decodes the answer.
func callJSON(t *testing.T, env *servertest.Env, route, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, env.URL+route, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Better-Compute", "1")
	req.Header.Set("Authorization", "Bearer "+env.AdminKey)
	res, err := env.Server.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s: HTTP %d %q", route, res.StatusCode, b)
	}
	return res.StatusCode, out
}
