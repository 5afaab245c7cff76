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
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/config"
	"github.com/better-compute/better-compute/database"
	"github.com/better-compute/better-compute/migrate"
	"github.com/better-compute/better-compute/pgcluster"
	"github.com/better-compute/better-compute/pki"
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
	if err := migrate.Apply(ctx, pool, log); err != nil {
		return err
	}
	key, err := iam.MintAdminKey(ctx, pool, adminName)
	if err != nil {
		return err
	}
	rootCA, err := initPKI(ctx, pool, &cfg, opts)
	if err != nil {
		return err
	}
	if cfg.Gateway.Listen == "" { // dev runs a gateway on loopback unless configured otherwise
		cfg.Gateway.Listen, cfg.Gateway.ControlListen = "127.0.0.1:0", "127.0.0.1:0"
	}
	return process.Run(ctx, process.Options{
		Config: &cfg, Pool: pool, Logger: log,
		OnListen: func(apiURL, gatewayAddr string) {
			if gatewayAddr != "" {
				fmt.Fprintf(opts.Out, "Gateway: %s\nRoot CA: %s\n", gatewayAddr, rootCA)
			}
			fmt.Fprintf(opts.Out, "API key: %s\nAPI: %s\n", key, apiURL)
		},
	})
}

// DevTrustDomain is the trust domain of a dev deployment whose configuration names none.
const DevTrustDomain = "dev.better-compute.local"

// initPKI initialises the machine PKI on first use, and writes its root CA beside the private
// cluster for daemons to verify the gateway with (bcd join --ca-file).
func initPKI(ctx context.Context, pool *pgxpool.Pool, cfg *config.Config, opts Options) (string, error) {
	td := cfg.TrustDomain
	if td == "" {
		td = DevTrustDomain
	}
	b, err := pki.Init(ctx, pool, cfg.Secret, td)
	if errors.Is(err, pki.ErrInitialized) {
		b, err = pki.Load(ctx, pool, cfg.Secret)
	}
	if err != nil {
		return "", err
	}
	cfg.TrustDomain = b.TrustDomain()
	dir, err := clusterDirOrDefault(opts.ClusterDir)
	if err != nil {
		return "", err
	}
	path := dir + ".root-ca.pem"
	if err := os.WriteFile(path, b.RootPEM(), 0o644); err != nil {
		return "", fmt.Errorf("write root CA: %w", err)
	}
	return path, nil
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
