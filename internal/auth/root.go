package auth

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
)

// RootTenantName names the tenant created at first start; its principals operate the deployment.
const RootTenantName = "root"

// EnsureRootTenant creates the root tenant if the deployment has none, and returns it. Several
// processes may call it at once.
func EnsureRootTenant(ctx context.Context, pool *pgxpool.Pool) (db.Tenant, error) {
	q := db.New(pool)
	if err := q.EnsureRootTenant(ctx, db.EnsureRootTenantParams{
		ID: uuid.Must(uuid.NewV7()), Name: RootTenantName, DisplayName: "Root",
	}); err != nil {
		return db.Tenant{}, fmt.Errorf("create root tenant: %w", err)
	}
	t, err := q.GetRootTenant(ctx)
	if err != nil {
		return db.Tenant{}, fmt.Errorf("read root tenant: %w", err)
	}
	return t, nil
}
