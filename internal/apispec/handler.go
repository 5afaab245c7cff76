package apispec

import (
	"net/http"
	"sync"

	"github.com/better-compute/better-compute/internal/registry"
)

// Handler serves the OpenAPI document of reg's methods, the ones this server answers (core
// and enabled modules), at basePath. The document is built at the first request, not at start,
// so servers that nobody asks pay nothing.
func Handler(reg *registry.Registry, basePath string) http.Handler {
	body := sync.OnceValues(func() ([]byte, error) {
		docs, err := LoadDocs()
		if err != nil {
			return nil, err
		}
		doc, err := Build(reg, docs, Options{BasePath: basePath, Examples: true})
		if err != nil {
			return nil, err
		}
		return Encode(doc)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b, err := body()
		if err != nil {
			http.Error(w, "the API document could not be built", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "max-age=60")
		_, _ = w.Write(b)
	})
}
