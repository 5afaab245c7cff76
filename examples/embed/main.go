// Command embed is a program of its own that carries Better Compute inside: it serves the
// control plane's API under /compute/ in its own mux, next to its own pages, and runs the worker
// roles in the same process. DATABASE_URL and BETTER_COMPUTE_SECRET configure it; ADDR is where
// it listens (default 127.0.0.1:8080).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	compute "github.com/better-compute/better-compute"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		log.Fatal(err)
	}
	app, err := newApp(ctx, compute.Config{
		DatabaseURL: os.Getenv("DATABASE_URL"), Secret: os.Getenv("BETTER_COMPUTE_SECRET"),
		Modules: compute.StandardModules(),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("serving on http://%s/ (the API at http://%s/compute/api)\n", ln.Addr(), ln.Addr())
	if err := app.serve(ctx, ln); err != nil {
		log.Fatal(err)
	}
}

// app is the program: its own routes and the deployment it embeds.
type app struct {
	d   *compute.Deployment
	mux *http.ServeMux
}

// newApp builds the deployment under /compute, migrates its schema and starts the API and the
// worker roles (no gateway: this program's machines are simulated or dial a gateway elsewhere).
func newApp(ctx context.Context, cfg compute.Config) (*app, error) {
	cfg.Prefix = "/compute"
	d, err := compute.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := d.Migrate(ctx); err != nil {
		d.Close()
		return nil, err
	}
	err = d.Start(ctx, compute.RoleAPI, compute.RoleControllers, compute.RoleScheduler, compute.RoleSinks, compute.RoleIAM)
	if err != nil {
		d.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/compute/", d.Handler())
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "the program's own home page; the control plane is under /compute/\n")
	})
	return &app{d: d, mux: mux}, nil
}

// serve serves on ln until ctx ends, then drains the server and waits for the roles to stop.
func (a *app) serve(ctx context.Context, ln net.Listener) error {
	defer a.d.Close()
	srv := &http.Server{Handler: a.mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = srv.Shutdown(sctx)
		cancel()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, a.d.Wait())
}
