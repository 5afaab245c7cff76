package server_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

// unscopedAllowed are the sqlc queries the API's handlers may run without the caller's tenant,
// each with why that is safe. Keep it short, and review every addition: a query that takes no
// tenant_id can read or change every tenant's rows.
var unscopedAllowed = map[string]string{
	// Keyed by the caller itself.
	"ClaimIdempotencyKey":   "keyed by the calling principal's id (auth.Caller), and a principal is in one tenant",
	"GetIdempotencyKey":     "keyed by the calling principal's id (auth.Caller), and a principal is in one tenant",
	"LockTenant":            "locks the caller's own tenant row, by auth.Caller's TenantID",
	"CreateTenantWithOwner": "creates a child tenant whose parent_id is the caller's tenant, with its owner inside it",
	"LockChildTenant":       "a tenant whose parent_id is the caller's tenant",
	// By the id of a row the handler has just read or locked with the caller's tenant id.
	"SetTenantSuspended":       "a child tenant locked by LockChildTenant first",
	"TombstoneTenant":          "a child tenant locked by LockChildTenant first",
	"EnsureSinkCursor":         "the cursor of a webhook just created with the caller's tenant (sink_cursors has no tenant)",
	"ClearSinkRetry":           "the cursor of a webhook just found with the caller's tenant (sink_cursors has no tenant)",
	"CountActivePoolLeases":    "a pool locked by LockPool with the caller's tenant",
	"ListPoolQuotas":           "pools listed or read with the caller's tenant",
	"PoolGPUCapacity":          "pools listed or read with the caller's tenant, or granted to it (aggregate numbers only)",
	"PoolNodeCapacity":         "pools listed or read with the caller's tenant, or granted to it (aggregate numbers only)",
	"PoolGPUModels":            "a pool read with the caller's tenant, at admission",
	"GetPoolGrowth":            "a pool read with the caller's tenant (or granted to it), at admission; what it can grow by, aggregate numbers only",
	"PoolLeaseAllocations":     "leases listed or read with the caller's tenant",
	"ReservationsAgainstLease": "a lease locked with the caller's tenant; the pools of its nodes are its tenant's",
	"PendingReservationLeases": "a reservation just cancelled with the caller's tenant",
	// Another tenant, named by the caller.
	"GranteeTenant": "pools/grant checks that the tenant it names exists and is active; only its id and status are read, and none is returned",
	// Deployment-wide, and returning no tenant's rows.
	"UsageBacklog": "how many usage records await aggregation, and the oldest's age: no tenant's data",
	// A tunnel ticket presented by its hash, whatever its tenant.
	"GetTunnelTicket": "the tunnel upgrade tells another tenant's ticket (403) from an unknown one (404) after the tenant-scoped spend failed; only the ticket's tenant id and state are read, and none is returned",
	// Public sign-ins: before them there is no caller, and a flow's random state (or device
	// handle), returned once to whoever started it, is its only credential.
	"CreateAuthFlow":     "records a public sign-in's flow for a method GetLoginAuthMethod read by its tenant and name; the flow is found again only by its state's hash",
	"SpendAuthFlow":      "spends a sign-in flow by the hash of its state, the sign-in's credential; returns only that flow's row",
	"GetDeviceFlow":      "reads a device sign-in by the hash of its handle, the sign-in's credential; returns only that flow's row",
	"GetAuthMethodByID":  "the method of a flow just spent by its state; the sign-in then acts only in that method's tenant (or the tenant below it its rules name)",
	"LockAuthFlowStarts": "a public sign-in's start, before there is a caller: advisory locks on the client address and on a method GetLoginAuthMethod read by its tenant and name; reads no row",
	"CountOpenAuthFlows": "a public sign-in's start: counts the unfinished flows of that client address and of that method (read by its tenant and name); returns two numbers, no row",
	// The identities of a method the caller's tenant owns.
	"MethodIdentityTenants": "authMethods/update: the tenants of the identities of a method just locked by LockAuthMethodByName with the caller's tenant (its own, or below the root tenant); only their ids, which the handler locks and checks",
	// The tunnels this API process relays, by the ids it holds.
	"TunnelsToEnd":      "the tunnels watcher's check of the tunnels this process relays (its instance name and the ids it opened with the callers' tenants); returns only ids and why they end",
	"RenewTunnelRelays": "the tunnels watcher renews the relay lease of the tunnels this process relays (its instance name and the ids it opened with the callers' tenants)",
}

// TestHandlerQueriesTakeTheTenant checks that every sqlc query the API's handlers use (a gen/db
// method named from a non-test Go file under server) takes the caller's tenant: its SQL
// binds a tenant id (sqlc.arg(tenant_id), or another *tenant_id* argument), so a handler cannot
// read or write another tenant's rows by passing an id it was given. The exceptions are the
// reviewed unscopedAllowed. A handler that starts calling an unscoped query, or a query used by
// a handler that loses its tenant predicate, fails this test (the negative case below shows it);
// so does an allow-list entry that is no longer needed.
func TestHandlerQueriesTakeTheTenant(t *testing.T) {
	t.Parallel()
	queries := sqlcQueries(t, filepath.Join("..", "queries"))
	if len(queries) < 50 {
		t.Fatalf("found %d queries in queries/*.sql; the parser of their -- name: headers is broken", len(queries))
	}
	// The request path: the handlers here, and the guard and admission transaction they run
	// in, which moved below the API's tree for the modules' services to share.
	used := map[string][]string{}
	for _, dir := range []string{".", filepath.Join("..", "internal", "guard"), filepath.Join("..", "internal", "admission")} {
		for name, at := range referencedQueries(t, os.DirFS(dir), queries) {
			used[name] = append(used[name], at...)
		}
	}
	if len(used) < 20 {
		t.Fatalf("found %d queries used by handlers; the scan of server is broken", len(used))
	}
	for _, v := range unscoped(queries, used, unscopedAllowed) {
		t.Error(v)
	}
	for name := range unscopedAllowed {
		switch sql, ok := queries[name]; {
		case !ok:
			t.Errorf("unscopedAllowed names %s, which is not a query in queries/*.sql: remove it", name)
		case takesTenant(sql):
			t.Errorf("unscopedAllowed names %s, which takes the tenant now: remove it", name)
		case used[name] == nil:
			t.Errorf("unscopedAllowed names %s, which no handler uses any more: remove it", name)
		}
	}
}

// TestTenantScopeCheckCatchesUnscopedQuery is the negative case: a handler that calls a query
// without a tenant predicate is reported, with where it is called; the same call to a scoped
// query, or to an allowed one, is not.
func TestTenantScopeCheckCatchesUnscopedQuery(t *testing.T) {
	t.Parallel()
	queries := map[string]string{
		"ListNodes":       "SELECT * FROM nodes WHERE tenant_id = sqlc.arg(tenant_id) ORDER BY id",
		"ListEveryNode":   "SELECT * FROM nodes -- tenant_id in a comment does not count\nORDER BY id",
		"GetAPIKeyByHash": "SELECT * FROM api_keys WHERE key_hash = sqlc.arg(key_hash)",
	}
	handler := `package nodes

func (s *Service) List(ctx context.Context) error {
	q := db.New(s.pool)
	_, _ = q.ListNodes(ctx, p.TenantID)
	_, _ = q.GetAPIKeyByHash(ctx, hash)
	_, _ = q.ListEveryNode(ctx)
	return nil
}
`
	fsys := fstest.MapFS{
		"nodes/nodes.go":      {Data: []byte(handler)},
		"nodes/nodes_test.go": {Data: []byte(strings.ReplaceAll(handler, "ListNodes", "ListEveryNode"))},
	}
	used := referencedQueries(t, fsys, queries)
	got := unscoped(queries, used, map[string]string{"GetAPIKeyByHash": "authentication"})
	if len(got) != 1 || !strings.Contains(got[0], "ListEveryNode") || !strings.Contains(got[0], "nodes/nodes.go:7") {
		t.Fatalf("unscoped = %q, want one violation: ListEveryNode at nodes/nodes.go:7", got)
	}
}

// nameHeader is sqlc's header of a statement: "-- name: GetNode :one".
var nameHeader = regexp.MustCompile(`(?m)^--\s*name:\s*(\w+)\s+:\w+\s*$`)

// sqlcQueries reads every statement of the *.sql files in dir, by name, without comment lines.
func sqlcQueries(t *testing.T, dir string) map[string]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no queries in %s: %v", dir, err)
	}
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		heads := nameHeader.FindAllStringSubmatchIndex(text, -1)
		for i, h := range heads {
			end := len(text)
			if i+1 < len(heads) {
				end = heads[i+1][0]
			}
			name := text[h[2]:h[3]]
			if _, dup := out[name]; dup {
				t.Fatalf("query %s is defined twice", name)
			}
			out[name] = text[h[1]:end]
		}
	}
	return out
}

// tenantArg is an argument that carries a tenant id: sqlc.arg(tenant_id), sqlc.narg(tenant_id),
// sqlc.arg(tenant_ids) and the like.
var tenantArg = regexp.MustCompile(`sqlc\.n?arg\(\s*\w*tenant_ids?\s*\)`)

// lineComment is an SQL comment to the end of the line.
var lineComment = regexp.MustCompile(`--[^\n]*`)

// takesTenant reports whether the statement binds a tenant id (outside comments).
func takesTenant(sql string) bool {
	return tenantArg.MatchString(lineComment.ReplaceAllString(sql, ""))
}

// referencedQueries finds the non-test Go files of fsys and returns, for each query name
// selected in them (q.GetNode(...), or q.GetNode as a value), where.
func referencedQueries(t *testing.T, fsys fs.FS, queries map[string]string) map[string][]string {
	t.Helper()
	used := map[string][]string{}
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := fs.ReadFile(fsys, path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if _, ok := queries[sel.Sel.Name]; ok {
					pos := fset.Position(sel.Sel.Pos())
					used[sel.Sel.Name] = append(used[sel.Sel.Name], pos.Filename+":"+strconv.Itoa(pos.Line))
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatalf("scan Go files: %v", err)
	}
	return used
}

// unscoped lists the used queries that take no tenant and are not allowed, sorted.
func unscoped(queries map[string]string, used map[string][]string, allowed map[string]string) []string {
	var out []string
	for name, where := range used {
		if _, ok := allowed[name]; ok || takesTenant(queries[name]) {
			continue
		}
		out = append(out, name+" takes no tenant_id but is used by an API handler at "+strings.Join(where, ", ")+
			": scope it by the caller's tenant, or add it to unscopedAllowed with the reason it is safe")
	}
	slices.Sort(out)
	return out
}
