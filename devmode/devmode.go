// Package devmode runs a whole deployment in one process for local development: a private
// PostgreSQL (unless the configuration names a database), the schema, the root tenant and an
// admin key, and every available role, printing the lines a developer or a script needs.
package devmode

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/better-compute/better-compute/config"
	"github.com/better-compute/better-compute/database"
	"github.com/better-compute/better-compute/migrate"
	"github.com/better-compute/better-compute/pgcluster"
	"github.com/better-compute/better-compute/process"
	"github.com/better-compute/better-compute/server/iam"
)

// Options configure a dev deployment.
type Options struct {
	// Config is the deployment configuration; an empty database.url starts the private cluster.
	Config *config.Config
	// ClusterDir holds the private cluster; empty means pgcluster.DefaultDir().
	ClusterDir string
	// Fresh deletes the private cluster first, starting from an empty database.
	Fresh bool
	// Out receives the lines scripts read: "API key: <key>", then "API: <url>".
	Out    io.Writer
	Logger *slog.Logger
}

// databaseName is the database dev creates in its private cluster.
const databaseName = "better_compute"

// adminName is the root service account whose fresh key dev prints at every start.
const adminName = "dev-admin"

// Run starts everything and blocks until ctx ends, then stops it all in order.
func Run(ctx context.Context, opts Options) error {
	cfg, log := *opts.Config, opts.Logger
	if cfg.Database.URL == "" {
		cluster, err := startCluster(ctx, opts)
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
		if cfg.Database.URL, err = createDatabase(ctx, cluster); err != nil {
			return err
		}
		fmt.Fprintf(opts.Out, "PostgreSQL: 127.0.0.1:%d database %s user postgres (password in %s/password)\n",
			cluster.Port(), databaseName, cluster.Dir())
	}
	pool, err := database.Open(ctx, cfg.Database.URL)
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
	key, err := iam.MintAdminKey(ctx, pool, adminName)
	if err != nil {
		return err
	}
	return process.Run(ctx, process.Options{
		Config: &cfg, Pool: pool, Logger: log,
		OnListen: func(url string) {
			fmt.Fprintf(opts.Out, "API key: %s\nAPI: %s\n", key, url)
		},
	})
}

// Secret returns the deployment secret dev uses when none is configured: random, kept beside
// the private cluster so sealed data stays readable across runs.
func Secret(clusterDir string) (string, error) {
	dir, err := clusterDirOrDefault(clusterDir)
	if err != nil {
		return "", err
	}
	path := dir + ".secret"
	if b, err := os.ReadFile(path); err == nil && len(b) >= config.MinSecretLength {
		return string(b), nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("dev secret: %w", err)
	}
	secret := pgcluster.RandomToken()
	if err := os.WriteFile(path, []byte(secret), 0o600); err != nil {
		return "", fmt.Errorf("dev secret: %w", err)
	}
	return secret, nil
}

func clusterDirOrDefault(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	return pgcluster.DefaultDir()
}

func startCluster(ctx context.Context, opts Options) (*pgcluster.Cluster, error) {
	dir, err := clusterDirOrDefault(opts.ClusterDir)
	if err != nil {
		return nil, err
	}
	if opts.Fresh {
		if err := os.RemoveAll(dir); err != nil {
			return nil, fmt.Errorf("remove %s: %w", dir, err)
		}
	}
	return pgcluster.Start(ctx, pgcluster.Options{Dir: dir, Logger: opts.Logger})
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
