package devmode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/config"
	provisionmod "github.com/better-compute/better-compute/internal/modules/provision"
	"github.com/better-compute/better-compute/internal/provision/simprovider"
	"github.com/better-compute/better-compute/module"
)

// simClass is the machine class dev creates in the root tenant with --sim-provider-delay.
const simClass = "sim"

// simProvisioning enables the provision module with the sim provider, its machines joining the
// dev gateway, which gets a fixed loopback port for them (the machines must know it before it
// listens). The module's migrations are applied by the caller.
func simProvisioning(cfg *config.Config) (module.Module, error) {
	if cfg.Gateway.Listen == "" { // as Run would default it, but on a port known now
		cfg.Gateway.Listen, cfg.Gateway.ControlListen = "127.0.0.1:0", "127.0.0.1:0"
	}
	host, port, err := net.SplitHostPort(cfg.Gateway.Listen)
	if err != nil {
		return nil, fmt.Errorf("--sim-provider-delay: gateway.listen: %w", err)
	}
	if port == "0" {
		ln, err := net.Listen("tcp", cfg.Gateway.Listen)
		if err != nil {
			return nil, fmt.Errorf("--sim-provider-delay: pick the gateway's port: %w", err)
		}
		cfg.Gateway.Listen = ln.Addr().String()
		if err := ln.Close(); err != nil {
			return nil, err
		}
		_, port, _ = net.SplitHostPort(cfg.Gateway.Listen)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	m := provisionmod.New(provisionmod.Providers{simprovider.Kind: simprovider.Default().Factory})
	mc, ok := m.Config().(*provisionmod.Config)
	if !ok {
		return nil, errors.New("provision module: unexpected configuration type")
	}
	mc.Providers, mc.GatewayEndpoint = []string{simprovider.Kind}, net.JoinHostPort(host, port)
	mc.AllowPrivateEndpoints = true // dev is one host: providers' endpoints are on loopback
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("--sim-provider-delay: %w", err)
	}
	return m, nil
}

// ensureSimClass creates the root tenant's "sim" class with the boot delay, unless an earlier
// run made it (which keeps its delay).
func ensureSimClass(ctx context.Context, pool *pgxpool.Pool, delay time.Duration) error {
	root, err := auth.EnsureRootTenant(ctx, pool)
	if err != nil {
		return err
	}
	params, err := json.Marshal(simprovider.Params{BootDelay: delay.String()})
	if err != nil {
		return err
	}
	q := provisiondb.New(pool)
	_, err = q.CreateClass(ctx, provisiondb.CreateClassParams{TenantID: root.ID, Name: simClass, Provider: simprovider.Kind, Params: params})
	if err != nil && !errors.Is(err, pgx.ErrNoRows) { // no row: an earlier run made it; it is kept

		return fmt.Errorf("create the sim machine class: %w", err)
	}
	return nil
}
