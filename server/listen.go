package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/better-compute/better-compute/internal/limit"
)

// DrainTimeout bounds how long Serve waits for in-flight requests after ctx ends.
const DrainTimeout = 30 * time.Second

// HTTPLimits bound what one connection may cost the server (config limits.*). A zero field takes
// its default from package limit.
type HTTPLimits struct {
	// ReadHeaderTimeout bounds reading a request's headers (limits.readHeaderTimeout).
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included (limits.readTimeout). Every
	// route served here is unary; a streaming route would need this off.
	ReadTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle this long (limits.idleTimeout).
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers (limits.headerBytes), over HTTP/1.1 and HTTP/2.
	MaxHeaderBytes int
}

// Serve serves h on ln over HTTP/1.1 and cleartext HTTP/2 (h2c, for gRPC clients behind a TLS
// terminator) until ctx ends, then stops accepting connections and drains in-flight requests.
// Slow or oversized request headers and bodies are cut off by limits.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger, limits HTTPLimits) error {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:           h,
		Protocols:         &protocols,
		ReadHeaderTimeout: limit.Or(limits.ReadHeaderTimeout, limit.DefaultReadHeaderTimeout),
		ReadTimeout:       limit.Or(limits.ReadTimeout, limit.DefaultReadTimeout),
		IdleTimeout:       limit.Or(limits.IdleTimeout, limit.DefaultIdleTimeout),
		MaxHeaderBytes:    limit.Or(limits.MaxHeaderBytes, limit.DefaultHeaderBytes),
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	log.Info("draining in-flight requests", "addr", ln.Addr().String())
	sctx, cancel := context.WithTimeout(context.Background(), DrainTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("drain %s: %w", ln.Addr(), err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
