package auth

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
)

// MintAdminKey returns a new API key for the root tenant's service account name, creating the
// account with the owner role if it does not exist: how an operator gets the first credential
// (`dev` prints one). The key's creation is recorded in the audit log.
func MintAdminKey(ctx context.Context, pool *pgxpool.Pool, name string) (Key, error) {
	root, err := EnsureRootTenant(ctx, pool)
	if err != nil {
		return Key{}, err
	}
	var key Key
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		q := db.New(tx)
		pr, err := q.GetPrincipalByName(ctx, db.GetPrincipalByNameParams{TenantID: root.ID, Name: name})
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			if pr, key, err = createOwner(ctx, q, root.ID, name); err != nil {
				return err
			}
		case err != nil:
			return err
		default:
			if key, err = createKey(ctx, q, pr, name); err != nil {
				return err
			}
		}
		return q.InsertAuditEvent(ctx, db.InsertAuditEventParams{
			TenantID: &root.ID, PrincipalID: &pr.ID, Method: "cli/mintAdminKey",
			Target: "apiKey/" + key.ID, Outcome: "ok", RequestID: "cli",
		})
	})
	if err != nil {
		return Key{}, fmt.Errorf("mint admin key: %w", err)
	}
	return key, nil
}

// createOwner creates a service account with the owner role and a key, in q's transaction.
func createOwner(ctx context.Context, q *db.Queries, tenant uuid.UUID, name string) (db.Principal, Key, error) {
	pr, err := q.CreatePrincipal(ctx, db.CreatePrincipalParams{
		ID: uuid.Must(uuid.NewV7()), TenantID: tenant, Kind: "service_account", Name: name,
	})
	if err != nil {
		return db.Principal{}, Key{}, fmt.Errorf("create service account %q: %w", name, err)
	}
	if _, err := q.CreateRoleBinding(ctx, db.CreateRoleBindingParams{
		ID: uuid.Must(uuid.NewV7()), TenantID: tenant, PrincipalID: pr.ID, Role: string(RoleOwner),
	}); err != nil {
		return db.Principal{}, Key{}, fmt.Errorf("make %q owner: %w", name, err)
	}
	key, err := createKey(ctx, q, pr, name)
	return pr, key, err
}

// createKey mints a key for pr that does not expire. Its creator is the CLI or the creation of
// a tenant, which act with the authority of an owner: the key counts as minted by an owner.
func createKey(ctx context.Context, q *db.Queries, pr db.Principal, name string) (Key, error) {
	key := NewKey()
	if _, err := q.CreateAPIKey(ctx, db.CreateAPIKeyParams{
		ID: key.ID, TenantID: pr.TenantID, PrincipalID: pr.ID, Name: name, SecretHash: key.Hash(), CreatedByOwner: true,
	}); err != nil {
		return Key{}, fmt.Errorf("create key for %q: %w", pr.Name, err)
	}
	return key, nil
}
