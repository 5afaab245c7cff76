// Package dashboard serves the web dashboard: the Vite app in this directory, built into dist/
// (committed, and rebuilt and compared by CI like generated code) and embedded in the binary.
// The API mounts it at /dashboard/.
package dashboard

import (
	"bytes"
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed dist
var dist embed.FS

// Files are the built dashboard: index.html and assets/.
func Files() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // dist is embedded at build time
	}
	return sub
}

// contentSecurityPolicy lets the page load only its own scripts and styles and call any API
// (the user may point it at an API on another origin); it may not be framed.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src *; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Handler serves the dashboard's files with paths relative to where it is mounted: "/" is
// index.html, "/assets/…" the hashed bundles (cached for a year). Mount it below a prefix with
// http.StripPrefix, the prefix ending in a slash.
func Handler() http.Handler {
	files := Files()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(path.Clean("/"+r.URL.Path), "/")
		if name == "" {
			name = "index.html"
		}
		b, err := fs.ReadFile(files, name)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		if ct := mime.TypeByExtension(path.Ext(name)); ct != "" {
			h.Set("Content-Type", ct)
		}
		if strings.HasPrefix(name, "assets/") {
			h.Set("Cache-Control", "public, max-age=31536000, immutable")
		} else {
			h.Set("Cache-Control", "no-cache")
			h.Set("Content-Security-Policy", contentSecurityPolicy)
			h.Set("X-Frame-Options", "DENY")
		}
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
	})
}

// Mount adds the dashboard to mux at prefix (for example "/dashboard"), redirecting the bare
// prefix to prefix + "/".
func Mount(mux *http.ServeMux, prefix string) {
	prefix = strings.TrimSuffix(prefix, "/")
	mux.Handle("GET "+prefix+"/", http.StripPrefix(prefix, Handler()))
	mux.Handle("GET "+prefix, http.RedirectHandler(prefix+"/", http.StatusMovedPermanently))
}
