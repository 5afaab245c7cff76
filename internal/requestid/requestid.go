// Package requestid gives every HTTP request an id that appears in its logs, its audit row, its
// internal errors and the X-Request-Id response header, so one failing call can be traced.
package requestid

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
)

// Header carries the id in both directions.
const Header = "X-Request-Id"

type key struct{}

// From returns the request's id, or "" outside a request.
func From(ctx context.Context) string {
	id, _ := ctx.Value(key{}).(string)
	return id
}

// With returns a context carrying id.
func With(ctx context.Context, id string) context.Context { return context.WithValue(ctx, key{}, id) }

// Middleware keeps a well-formed incoming X-Request-Id (a proxy's) or mints one, and echoes it.
func Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get(Header)
		if !valid(id) {
			b := make([]byte, 12)
			_, _ = rand.Read(b)
			id = hex.EncodeToString(b)
		}
		w.Header().Set(Header, id)
		next.ServeHTTP(w, r.WithContext(With(r.Context(), id)))
	})
}

func valid(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}
