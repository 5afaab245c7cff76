package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// DrainTimeout bounds how long Serve waits for in-flight requests after ctx ends.
const DrainTimeout = 30 * time.Second

// Serve serves h on ln over HTTP/1.1 and cleartext HTTP/2 (h2c, for gRPC clients behind a TLS
// terminator) until ctx ends, then stops accepting connections and drains in-flight requests.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, log *slog.Logger) error {
	var protocols http.Protocols
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:           h,
		Protocols:         &protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
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
