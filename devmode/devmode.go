// Package devmode runs a whole deployment in one process for local development: a private
// PostgreSQL (unless a database URL is given), the schema, and the API, printing the addresses
// a developer or a script needs.
package devmode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/better-compute/better-compute/database"
	"github.com/better-compute/better-compute/migrate"
	"github.com/better-compute/better-compute/pgcluster"
	"github.com/better-compute/better-compute/server"
)

// Options configure a dev deployment.
type Options struct {
	// Host and Port are where the API listens; port 0 picks a free one.
	Host string
	Port int
	// DatabaseURL points at an existing database; empty starts the private cluster.
	DatabaseURL string
	// ClusterDir holds the private cluster; empty means pgcluster.DefaultDir().
	ClusterDir string
	// Fresh deletes the private cluster first, starting from an empty database.
	Fresh bool
	// Out receives the lines scripts read ("API: <url>").
	Out io.Writer
	// Logger receives logs.
	Logger *slog.Logger
}

// databaseName is the database dev creates in its private cluster.
const databaseName = "better_compute"

// Run starts everything and blocks until ctx ends, then stops it all in order.
func Run(ctx context.Context, opts Options) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	url := opts.DatabaseURL
	if url == "" {
		cluster, err := startCluster(ctx, opts, log)
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := cluster.Stop(sctx); err != nil {
				log.Error("stop private PostgreSQL", "err", err)
			}
		}()
		if url, err = createDatabase(ctx, cluster); err != nil {
			return err
		}
		fmt.Fprintf(opts.Out, "PostgreSQL: 127.0.0.1:%d database %s user postgres (password in %s/password)\n",
			cluster.Port(), databaseName, cluster.Dir())
	}
	pool, err := database.Open(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	m, err := migrate.New(pool)
	if err != nil {
		return err
	}
	applied, err := m.Up(ctx)
	if err != nil {
		return err
	}
	for _, mig := range applied {
		log.Info("applied migration", "migration", mig.String())
	}
	api, err := server.New(server.Options{Pool: pool, Logger: log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)))
	if err != nil {
		return fmt.Errorf("listen for the API: %w", err)
	}
	fmt.Fprintf(opts.Out, "API: http://%s%s\n", displayAddr(ln.Addr()), api.BasePath())
	return server.Serve(ctx, ln, api, log)
}

func startCluster(ctx context.Context, opts Options, log *slog.Logger) (*pgcluster.Cluster, error) {
	dir := opts.ClusterDir
	if dir == "" {
		var err error
		if dir, err = pgcluster.DefaultDir(); err != nil {
			return nil, err
		}
	}
	if opts.Fresh {
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("remove %s: %w", dir, err)
		}
	}
	return pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Logger: log})
}

// createDatabase makes the dev database on first use and returns its URL.
func createDatabase(ctx context.Context, c *pgcluster.Cluster) (string, error) {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return "", fmt.Errorf("connect to private PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{databaseName}.Sanitize())
	var pgErr *pgconn.PgError
	if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "42P04") { // duplicate_database
		return "", fmt.Errorf("create database %s: %w", databaseName, err)
	}
	return c.URL(databaseName), nil
}

// displayAddr turns a listener address into one a browser can open: an unspecified host
// becomes loopback.
func displayAddr(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return a.String()
	}
	host := tcp.IP.String()
	if tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}
