// Package secrets implements bettercompute.secrets.v1.SecretsService: a tenant's node secrets,
// which its nodes fetch from the gateway (DaemonService.Secret) when their NodeSpec names them.
// Every method acts in the caller's tenant, and none returns a value: values go in sealed and come
// out only to a granted node.
package secrets

import (
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	secretsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/secrets/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/secrets/v1/secretsv1connect"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/event"
	"github.com/better-compute/better-compute/internal/page"
	"github.com/better-compute/better-compute/internal/secret"
)

// Limits of a tenant's secrets.
const (
	// MaxValueBytes bounds a value.
	MaxValueBytes = 64 << 10
	// MaxPerTenant bounds how many secrets a tenant keeps.
	MaxPerTenant = 1000
)

// Service answers SecretsService calls.
type Service struct {
	pool   *pgxpool.Pool
	admit  *admission.Admitter
	sealer *secret.Sealer
}

var _ secretsv1connect.SecretsServiceHandler = (*Service)(nil)

// New returns the service. sealer seals values: secret.NewSealer of the deployment secret, the
// same the gateways open them with.
func New(pool *pgxpool.Pool, admit *admission.Admitter, sealer *secret.Sealer) *Service {
	return &Service{pool: pool, admit: admit, sealer: sealer}
}

// Create stores a new secret and returns its metadata.
func (s *Service) Create(ctx context.Context, req *secretsv1.CreateRequest) (*secretsv1.CreateResponse, error) {
	if err := checkName("name", req.GetName()); err != nil {
		return nil, err
	}
	if err := checkValue(req.GetValue()); err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	// The Idempotency-Key's request hash is taken over the value's keyed digest, not the value:
	// a plain hash of a short value could be guessed from the idempotency table. The stored
	// response holds metadata only.
	return admission.Do(ctx, s.admit, redact(s.sealer, req), func(ctx context.Context, tx *admission.Tx) (*secretsv1.CreateResponse, error) {
		if err := tx.Q.LockTenantSecrets(ctx, p.TenantID); err != nil {
			return nil, err
		}
		n, err := tx.Q.CountSecrets(ctx, p.TenantID)
		if err != nil {
			return nil, err
		}
		if n >= MaxPerTenant {
			return nil, apierr.FailedPrecondition("the tenant has %d secrets, the most allowed; delete one first", n)
		}
		id := uuid.Must(uuid.NewV7())
		row, err := tx.Q.CreateSecret(ctx, db.CreateSecretParams{
			ID: id, TenantID: p.TenantID, Name: req.GetName(), ValueSealed: s.sealer.Seal(id, req.GetValue()),
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, apierr.AlreadyExists("a secret named %q already exists; secrets/update changes its value", req.GetName())
		}
		if err != nil {
			return nil, err
		}
		sec := db.ListSecretsRow(row)
		tx.Target("secret", id)
		if err := tx.Emit(p.TenantID, event.SecretCreated{SecretRef: eventData(sec)}); err != nil {
			return nil, err
		}
		return &secretsv1.CreateResponse{Secret: toProto(sec)}, nil
	})
}

// List lists the secrets of the caller's tenant by name, without their values.
func (s *Service) List(ctx context.Context, req *secretsv1.ListRequest) (*secretsv1.ListResponse, error) {
	size, after, err := page.Of(req.GetPageSize(), req.GetPageToken(), "")
	if err != nil {
		return nil, err
	}
	rows, err := db.New(s.pool).ListSecrets(ctx, db.ListSecretsParams{TenantID: auth.Caller(ctx).TenantID, After: after, Lim: size + 1})
	if err != nil {
		return nil, err
	}
	rows, next := page.Next(rows, size, func(r db.ListSecretsRow) string { return r.Name })
	res := &secretsv1.ListResponse{NextPageToken: next}
	for _, r := range rows {
		res.Secrets = append(res.Secrets, toProto(r))
	}
	return res, nil
}

// Update replaces a secret's value.
func (s *Service) Update(ctx context.Context, req *secretsv1.UpdateRequest) (*secretsv1.UpdateResponse, error) {
	if err := checkName("name", req.GetName()); err != nil {
		return nil, err
	}
	if err := checkValue(req.GetValue()); err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, redact(s.sealer, req), func(ctx context.Context, tx *admission.Tx) (*secretsv1.UpdateResponse, error) {
		cur, err := tx.Q.LockSecret(ctx, db.LockSecretParams{TenantID: p.TenantID, Name: req.GetName()})
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "secret %q not found", req.GetName())
		}
		tx.Target("secret", cur.ID)
		row, err := tx.Q.UpdateSecretValue(ctx, db.UpdateSecretValueParams{
			TenantID: p.TenantID, ID: cur.ID, ValueSealed: s.sealer.Seal(cur.ID, req.GetValue()),
		})
		if err != nil {
			return nil, err
		}
		sec := db.ListSecretsRow(row)
		if err := tx.Emit(p.TenantID, event.SecretUpdated{SecretRef: eventData(sec)}); err != nil {
			return nil, err
		}
		return &secretsv1.UpdateResponse{Secret: toProto(sec)}, nil
	})
}

// Delete removes a secret; nodes asking for it from then on are told it does not exist.
func (s *Service) Delete(ctx context.Context, req *secretsv1.DeleteRequest) (*secretsv1.DeleteResponse, error) {
	if err := checkName("name", req.GetName()); err != nil {
		return nil, err
	}
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*secretsv1.DeleteResponse, error) {
		id, err := tx.Q.DeleteSecret(ctx, db.DeleteSecretParams{TenantID: p.TenantID, Name: req.GetName()})
		if err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "secret %q not found", req.GetName())
		}
		tx.Target("secret", id)
		if err := tx.Emit(p.TenantID, event.SecretDeleted{SecretRef: event.SecretRef{ID: id, Name: req.GetName()}}); err != nil {
			return nil, err
		}
		return &secretsv1.DeleteResponse{}, nil
	})
}

func checkName(field, s string) error {
	if !secret.ValidName(s) {
		return apierr.InvalidArgument(field, "%q must be 1 to 63 letters, digits, '-', '_', '.' and '/', starting and ending with a letter or digit", s)
	}
	return nil
}

// checkValue bounds a value; its errors never quote it.
func checkValue(v []byte) error {
	if len(v) == 0 || len(v) > MaxValueBytes {
		return apierr.InvalidArgument("value", "must be 1 to %d bytes, got %d", MaxValueBytes, len(v))
	}
	return nil
}

// eventData is what secret events carry: never the value.
func eventData(r db.ListSecretsRow) event.SecretRef {
	return event.SecretRef{ID: r.ID, Name: r.Name}
}

func toProto(r db.ListSecretsRow) *secretsv1.Secret {
	return &secretsv1.Secret{
		Id: r.ID.String(), TenantId: r.TenantID.String(), Name: r.Name,
		CreateTime: timestamppb.New(r.CreatedAt), UpdateTime: timestamppb.New(r.UpdatedAt),
	}
}
