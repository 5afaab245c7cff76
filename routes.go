package compute

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/better-compute/better-compute/module"
	"github.com/better-compute/better-compute/server"
)

// Route is one of the program's own routes, served by Deployment.Handler beside the API.
type Route struct {
	// Pattern is an http.ServeMux pattern: "GET /status", "/billing/", "POST /hooks/{id}".
	Pattern string
	Handler http.Handler
}

// validRoutes checks that every route has a handler and a pattern http.ServeMux accepts, and
// that no two routes conflict.
func validRoutes(routes []Route) (err error) {
	mux := http.NewServeMux()
	for i, r := range routes {
		if r.Handler == nil {
			return fmt.Errorf("routes[%d] (%q): no handler", i, r.Pattern)
		}
		func() {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("routes[%d]: %v", i, p)
				}
			}()
			mux.Handle(r.Pattern, r.Handler)
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// withRoutes serves routes, and the API for everything else. routesFinding has made sure no
// route takes a path of the API's.
func withRoutes(api http.Handler, routes []Route) http.Handler {
	if len(routes) == 0 {
		return api
	}
	mux := http.NewServeMux()
	for _, r := range routes {
		mux.Handle(r.Pattern, r.Handler)
	}
	mux.Handle("/", api)
	return mux
}

// routesFinding is doctor's "host routes" check: a route clashes with the API when its path lies
// within the API's (below its base path, or one of its exact paths), or when it would take a
// request for one of the API's paths (a pattern such as "/" or "/{any}/").
func routesFinding(routes []Route, prefix, basePath string) module.Finding {
	reserved := server.Reserved(prefix, basePath)
	var clashes []string
	for _, r := range routes {
		if path, ok := clash(r.Pattern, reserved); ok {
			clashes = append(clashes, fmt.Sprintf("%q takes the API's %s", r.Pattern, path))
		}
	}
	f := module.Finding{Check: "host routes", Severity: module.OK, Cause: fmt.Sprintf("%d routes beside the API, none on its paths", len(routes))}
	if len(clashes) > 0 {
		f.Severity, f.Cause = module.Error, strings.Join(clashes, "; ")
		f.Fix = "move the routes off the API's paths (" + strings.Join(reserved, ", ") + ") or set Config.Prefix"
	}
	return f
}

// clash reports the first reserved path that pattern overlaps.
func clash(pattern string, reserved []string) (string, bool) {
	method, host, path := splitPattern(pattern)
	for _, res := range reserved {
		if strings.HasSuffix(res, "/") {
			if strings.HasPrefix(path, res) || path+"/" == res {
				return res, true
			}
		} else if path == res {
			return res, true
		}
	}
	// Wildcards and subtrees: would the route answer a request for one of the API's paths?
	probe := http.NewServeMux()
	probe.Handle(pattern, http.NotFoundHandler())
	methods := []string{http.MethodGet, http.MethodPost}
	if method != "" {
		methods = []string{method}
	}
	for _, res := range reserved {
		paths := []string{res}
		if strings.HasSuffix(res, "/") {
			paths = append(paths, res+"nodes/list")
		}
		for _, p := range paths {
			for _, m := range methods {
				req, err := http.NewRequest(m, "http://localhost"+p, nil)
				if err != nil {
					continue
				}
				if host != "" {
					req.Host = host
				}
				if _, matched := probe.Handler(req); matched != "" {
					return res, true
				}
			}
		}
	}
	return "", false
}

// splitPattern splits an http.ServeMux pattern, "[METHOD ][HOST]/[PATH]".
func splitPattern(pattern string) (method, host, path string) {
	rest := pattern
	if i := strings.IndexAny(rest, " \t"); i >= 0 {
		method, rest = rest[:i], strings.TrimLeft(rest[i:], " \t")
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		host, path = rest[:i], rest[i:]
	}
	return method, host, path
}
