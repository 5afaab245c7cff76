package server_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path"
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
	for _, v := range unscoped(queries, used, unscopedAllowed, "unscopedAllowed") {
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
	got := unscoped(queries, used, map[string]string{"GetAPIKeyByHash": "authentication"}, "unscopedAllowed")
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

// unscoped lists the used queries that take no tenant and are not allowed, sorted; list names
// the allow list to add a safe one to.
func unscoped(queries map[string]string, used map[string][]string, allowed map[string]string, list string) []string {
	var out []string
	for name, where := range used {
		if _, ok := allowed[name]; ok || takesTenant(queries[name]) {
			continue
		}
		out = append(out, name+" takes no tenant_id but is used by an API handler at "+strings.Join(where, ", ")+
			": scope it by the caller's tenant, or add it to "+list+" with the reason it is safe")
	}
	slices.Sort(out)
	return out
}

// moduleUnscopedAllowed are, per module (its directory's name under internal/modules), the sqlc
// queries (the module's own or the core's) its API handlers may run without the caller's tenant,
// each with why that is safe. The same rules as unscopedAllowed's apply; the reasons are the
// module's handlers', so a core query allowed for the core's handlers is not allowed here.
var moduleUnscopedAllowed = map[string]map[string]string{
	"events": {
		"GetNatsStatus": "events/getStatus reads the sink's deployment-wide state only when the caller is a principal of the root tenant (the operator), and returns it to no one else",
	},
	"provision": {
		// By the id of a machine the handler has just created, read or locked with the caller's tenant.
		"AddMachineStep":   "a machine just created with the caller's tenant (machines/create) or locked by LockMachineOfTenant (machines/delete, machines/powerCycle)",
		"ListMachineSteps": "a machine just created with the caller's tenant, read by GetMachine with it, or locked by LockMachineOfTenant",
		"SetMachineState":  "machines/delete: a machine locked by LockMachineOfTenant first",
		// By the id of a pool the handler has just read with the caller's tenant (a pool's tenant
		// never changes, and the autoscaler makes a pool's machines in the pool's tenant).
		"SetPoolGrowth":         "poolScaling/set: a pool GetTenantPool read with the caller's tenant in the same transaction (pool_growth has no tenant)",
		"DeletePoolGrowth":      "poolScaling/delete: a pool whose scaling DeletePoolScaling just deleted with the caller's tenant (pool_growth has no tenant)",
		"CountPoolLiveMachines": "pools whose scalings were read or written with the caller's tenant (GetPoolScaling, ListPoolScalings, UpsertPoolScaling); counts only",
		"ListPoolMachines":      "poolScaling/get: a pool whose scaling GetPoolScaling read with the caller's tenant first",
		"ListScalingDecisions":  "poolScaling/get: a pool whose scaling GetPoolScaling read with the caller's tenant first (decisions have no tenant)",
		// The public boot configuration: the machine has no caller, and its single-use boot
		// ticket, bcb_<machine id>_<secret>, is its only credential.
		"LockBootTicket":  "machines/bootConfig: the ticket of the machine the presented ticket names; nothing is returned unless the secret matches its stored hash (and the ticket is unused, unexpired, its machine booting)",
		"SpendBootTicket": "machines/bootConfig: the ticket LockBootTicket locked and whose secret matched, spent in the same transaction",
	},
}

// TestModuleHandlerQueriesTakeTheTenant is TestHandlerQueriesTakeTheTenant for the modules'
// APIs: in each module (a directory under internal/modules with a queries directory), the
// queries its Connect handlers run, directly or through the functions of their package they
// call, must take the caller's tenant, or be in moduleUnscopedAllowed. A module's packages also
// hold its reconcilers, jobs and doctor checks, which run unscoped queries by design, so only
// what a handler reaches is checked (see handlerQueries). The queries are the core's
// (queries/*.sql, which a module calls through gen/db) and the module's own; a name both define
// fails, as it would make the check ambiguous.
func TestModuleHandlerQueriesTakeTheTenant(t *testing.T) {
	t.Parallel()
	core := sqlcQueries(t, filepath.Join("..", "queries"))
	root := filepath.Join("..", "internal", "modules")
	dirs, err := filepath.Glob(filepath.Join(root, "*", "queries"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 2 {
		t.Fatalf("found %d modules with queries under %s, want the provision and events ones at least: the scan is broken", len(dirs), root)
	}
	fsys := os.DirFS(root)
	found, reached := map[string]bool{}, 0
	for _, dir := range dirs {
		m := filepath.Base(filepath.Dir(dir))
		found[m] = true
		own := sqlcQueries(t, dir)
		queries := maps.Clone(core)
		for name, sql := range own {
			if _, dup := core[name]; dup {
				t.Errorf("module %s defines query %s, which queries/*.sql defines too: rename it, the check needs the names unique", m, name)
			}
			queries[name] = sql
		}
		used, handlers := handlerQueries(t, fsys, m, queries)
		reached += len(used)
		if handlers == 0 {
			t.Errorf("found no Connect handler in module %s: the scan of its handlers is broken (or, if it serves no API, skip it here)", m)
		}
		allowed := moduleUnscopedAllowed[m]
		for _, v := range unscoped(queries, used, allowed, "moduleUnscopedAllowed["+strconv.Quote(m)+"]") {
			t.Errorf("module %s: %s", m, v)
		}
		for name := range allowed {
			switch sql, ok := queries[name]; {
			case !ok:
				t.Errorf("moduleUnscopedAllowed[%q] names %s, which is not a query in queries/*.sql or the module's: remove it", m, name)
			case takesTenant(sql):
				t.Errorf("moduleUnscopedAllowed[%q] names %s, which takes the tenant now: remove it", m, name)
			case used[name] == nil:
				t.Errorf("moduleUnscopedAllowed[%q] names %s, which no handler of the module uses any more: remove it", m, name)
			}
		}
	}
	if reached < 15 {
		t.Errorf("found %d queries used by the modules' handlers; the scan of their call graphs is broken", reached)
	}
	for m := range moduleUnscopedAllowed {
		if !found[m] {
			t.Errorf("moduleUnscopedAllowed names module %s, which has no queries under %s: remove it", m, root)
		}
	}
}

// TestModuleTenantScopeCheckCatchesUnscopedQuery is the module scan's negative case: a handler
// that reaches an unscoped query through a helper of its package (a method it calls, which calls
// a function) is reported, with where the query is called; the same query called only from a
// reconciler is not, and neither is a method that is not a handler.
func TestModuleTenantScopeCheckCatchesUnscopedQuery(t *testing.T) {
	t.Parallel()
	queries := map[string]string{
		"GetMachine":      "SELECT * FROM machines WHERE tenant_id = sqlc.arg(tenant_id) AND id = sqlc.arg(id)",
		"GetMachineByID":  "SELECT * FROM machines WHERE id = sqlc.arg(id)",
		"ListAllMachines": "SELECT * FROM machines ORDER BY id",
	}
	service := `package mod

func (s *service) GetMachine(ctx context.Context, req *modv1.GetMachineRequest) (*modv1.GetMachineResponse, error) {
	q := moddb.New(s.pool)
	m, err := q.GetMachine(ctx, moddb.GetMachineParams{TenantID: auth.Caller(ctx).TenantID, ID: id})
	if err != nil {
		return nil, err
	}
	return s.describe(ctx, m)
}

func (s *service) notAHandler(ctx context.Context, id uuid.UUID) error {
	_, err := moddb.New(s.pool).ListAllMachines(ctx)
	return err
}
`
	helpers := `package mod

func (s *service) describe(ctx context.Context, m moddb.Machine) (*modv1.GetMachineResponse, error) {
	return toProto(ctx, moddb.New(s.pool), m.ID)
}

func toProto(ctx context.Context, q *moddb.Queries, id uuid.UUID) (*modv1.GetMachineResponse, error) {
	_, err := q.GetMachineByID(ctx, id)
	return nil, err
}
`
	reconciler := `package mod

func (c *Controller) Reconcile(ctx context.Context, key string) error {
	_, err := moddb.New(c.pool).ListAllMachines(ctx)
	_, _ = moddb.New(c.pool).GetMachineByID(ctx, id)
	return err
}
`
	fsys := fstest.MapFS{
		"mod/service.go":      {Data: []byte(service)},
		"mod/helpers.go":      {Data: []byte(helpers)},
		"mod/controller.go":   {Data: []byte(reconciler)},
		"mod/service_test.go": {Data: []byte(strings.ReplaceAll(service, "q.GetMachine(", "q.ListAllMachines("))},
	}
	used, handlers := handlerQueries(t, fsys, "mod", queries)
	if handlers != 1 {
		t.Fatalf("found %d handlers, want 1 (GetMachine)", handlers)
	}
	got := unscoped(queries, used, nil, "moduleUnscopedAllowed")
	if len(got) != 1 || !strings.Contains(got[0], "GetMachineByID") || !strings.Contains(got[0], "mod/helpers.go:8") ||
		strings.Contains(got[0], "controller.go") {
		t.Fatalf("unscoped = %q, want one violation: GetMachineByID at mod/helpers.go:8 (and not at controller.go)", got)
	}
}

// handlerQueries finds the Connect handlers in the non-test Go files under dir of fsys (see
// isHandler), and returns, for each query name selected in them or in the declarations of
// their package they reach, where; and how many handlers it found. Reaching is by name, within
// a package (a directory), through the bodies of functions and methods and the values of
// package-level variables: a bare f (f(...), or f as a value) reaches every function and
// package-level variable named f, a selected x.f (s.f(...), x.f as a method value, (*T).f)
// every method named f, whatever its receiver. That takes in more than a handler can call
// (another type's method of the same name), never less, but for calls into other packages,
// whose queries the core's test scans for guard and admission, and for a method another package
// calls on a value the handler hands it (through an interface: none of the modules' handlers
// does that with a type that runs queries).
func handlerQueries(t *testing.T, fsys fs.FS, dir string, queries map[string]string) (map[string][]string, int) {
	t.Helper()
	files := map[string][]string{} // by package directory
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return err
		}
		files[path.Dir(p)] = append(files[path.Dir(p)], p)
		return nil
	})
	if err != nil {
		t.Fatalf("scan Go files: %v", err)
	}
	used := map[string][]string{}
	handlers := 0
	for _, pkg := range slices.Sorted(maps.Keys(files)) {
		fset := token.NewFileSet()
		// What a handler can reach, by name: f names a function or a package-level variable
		// (or something local, or of another package), x.f a method (or a field, or something
		// of another package).
		funcs, methods := map[string][]ast.Node{}, map[string][]ast.Node{}
		var todo []ast.Node
		for _, p := range files[pkg] {
			src, err := fs.ReadFile(fsys, p)
			if err != nil {
				t.Fatal(err)
			}
			f, err := parser.ParseFile(fset, p, src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatalf("parse %s: %v", p, err)
			}
			for _, d := range f.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					if d.Body == nil {
						continue
					}
					if d.Recv == nil {
						funcs[d.Name.Name] = append(funcs[d.Name.Name], d.Body)
						continue
					}
					methods[d.Name.Name] = append(methods[d.Name.Name], d.Body)
					if isHandler(d) {
						handlers++
						todo = append(todo, d.Body)
					}
				case *ast.GenDecl:
					for _, s := range d.Specs {
						if v, ok := s.(*ast.ValueSpec); ok {
							for _, n := range v.Names {
								funcs[n.Name] = append(funcs[n.Name], v)
							}
						}
					}
				}
			}
		}
		seen := map[ast.Node]bool{}
		for len(todo) > 0 {
			n := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			if seen[n] {
				continue
			}
			seen[n] = true
			selected := map[*ast.Ident]bool{}
			ast.Inspect(n, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.SelectorExpr: // visited before its Sel
					selected[n.Sel] = true
					todo = append(todo, methods[n.Sel.Name]...)
					if _, ok := queries[n.Sel.Name]; ok {
						pos := fset.Position(n.Sel.Pos())
						used[n.Sel.Name] = append(used[n.Sel.Name], pos.Filename+":"+strconv.Itoa(pos.Line))
					}
				case *ast.Ident:
					if !selected[n] {
						todo = append(todo, funcs[n.Name]...)
					}
				}
				return true
			})
		}
	}
	return used, handlers
}

// isHandler reports whether fd is a Connect handler: a method taking (context.Context, *XRequest)
// and returning (*YResponse, error), the generated "simple" handler interfaces' shape, or
// (context.Context, *connect.Request[X]) returning (*connect.Response[Y], error), the other one.
func isHandler(fd *ast.FuncDecl) bool {
	if fd.Recv == nil {
		return false
	}
	params, results := fieldTypes(fd.Type.Params), fieldTypes(fd.Type.Results)
	if len(params) != 2 || len(results) != 2 {
		return false
	}
	if ctx, ok := params[0].(*ast.SelectorExpr); !ok || ctx.Sel.Name != "Context" || typeName(ctx.X) != "context" {
		return false
	}
	req, ok := params[1].(*ast.StarExpr)
	if !ok || !strings.HasSuffix(typeName(req.X), "Request") {
		return false
	}
	res, ok := results[0].(*ast.StarExpr)
	return ok && strings.HasSuffix(typeName(res.X), "Response") && typeName(results[1]) == "error"
}

// fieldTypes is the type of each parameter (or result) of fl, one per name.
func fieldTypes(fl *ast.FieldList) []ast.Expr {
	if fl == nil {
		return nil
	}
	var out []ast.Expr
	for _, f := range fl.List {
		for range max(len(f.Names), 1) {
			out = append(out, f.Type)
		}
	}
	return out
}

// typeName is the name a type expression ends in: GetNodeRequest for v1.GetNodeRequest, Request
// for connect.Request[v1.GetNodeRequest]; "" for other expressions.
func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	case *ast.IndexExpr:
		return typeName(e.X)
	case *ast.IndexListExpr:
		return typeName(e.X)
	}
	return ""
}
