package server

import (
	"net/http"

	connectcors "connectrpc.com/cors"
	"github.com/rs/cors"

	"github.com/better-compute/better-compute/internal/guard"
	"github.com/better-compute/better-compute/internal/requestid"
)

// CORSOptions say which browser origins may call the API.
type CORSOptions struct {
	// AllowedOrigins lists origins ("https://app.example.com", or "*"); none means no
	// cross-origin calls.
	AllowedOrigins []string
	// AllowCredentials lets browsers send cookies and HTTP authentication.
	AllowCredentials bool
}

// handler wraps h with CORS: the Connect protocol's headers, plus the API's own.
func (o CORSOptions) handler(h http.Handler) http.Handler {
	if len(o.AllowedOrigins) == 0 {
		return h
	}
	return cors.New(cors.Options{
		AllowedOrigins:   o.AllowedOrigins,
		AllowCredentials: o.AllowCredentials,
		AllowedMethods:   connectcors.AllowedMethods(),
		AllowedHeaders: append(connectcors.AllowedHeaders(),
			guard.ClientHeader, guard.IdempotencyKeyHeader, "Authorization", requestid.Header),
		ExposedHeaders: append(connectcors.ExposedHeaders(), requestid.Header),
		MaxAge:         7200,
	}).Handler(h)
}
