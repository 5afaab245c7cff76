package provision

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"slices"

	"github.com/jackc/pgx/v5"

	provisionmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1"
	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/page"
	"github.com/better-compute/better-compute/internal/provision"
)

// Bounds of a class.
const (
	// MaxParamsBytes bounds a class's parameters, as JSON.
	MaxParamsBytes = 16 << 10
	// MaxCredentialsBytes bounds a class's credentials.
	MaxCredentialsBytes = 16 << 10
)

// namePattern is the syntax of class and machine names: a DNS label, so a machine's name can be
// its hostname.
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

const nameRule = "must be 1 to 63 lower-case letters, digits and '-', starting with a letter"

// CreateClass creates a machine class after its provider's factory accepted the parameters.
func (s *service) CreateClass(ctx context.Context, req *provisionmodulev1.CreateClassRequest) (*provisionmodulev1.CreateClassResponse, error) {
	if !namePattern.MatchString(req.GetName()) {
		return nil, apierr.InvalidArgument("name", nameRule)
	}
	f, ok := s.open.providers[req.GetProvider()]
	if !ok {
		kinds := make([]string, 0, len(s.open.providers))
		for k := range s.open.providers {
			kinds = append(kinds, k)
		}
		slices.Sort(kinds)
		return nil, apierr.InvalidArgument("provider", "must be a provider this deployment enables (%s)", list(kinds))
	}
	params := []byte("{}")
	if req.GetParams() != nil {
		var err error
		if params, err = json.Marshal(req.GetParams().AsMap()); err != nil {
			return nil, apierr.InvalidArgument("params", "%v", err)
		}
	}
	if len(params) > MaxParamsBytes {
		return nil, apierr.InvalidArgument("params", "must be at most %d bytes as JSON, is %d", MaxParamsBytes, len(params))
	}
	creds := req.GetCredentials()
	if len(creds) > MaxCredentialsBytes {
		return nil, apierr.InvalidArgument("credentials", "must be at most %d bytes", MaxCredentialsBytes)
	}
	if _, _, err := classShape(req.GetProvider(), params); err != nil {
		return nil, apierr.InvalidArgument("params.shape", "%v", err)
	}
	if _, err := f(providerParams(params), creds, s.open.egress); err != nil {
		field := "params"
		if fe, ok := errors.AsType[*provision.FieldError](err); ok {
			field += "." + fe.Field
		}
		return nil, apierr.InvalidArgument(field, "the %s provider refuses them: %v", req.GetProvider(), err)
	}
	p := auth.Caller(ctx)
	var sealed []byte
	if len(creds) > 0 {
		sealed = s.open.seal.credentials.Seal(creds, classAAD(p.TenantID, req.GetName()))
	}
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*provisionmodulev1.CreateClassResponse, error) {
		tx.Target("machineClass", req.GetName())
		c, err := provisiondb.New(tx.DB()).CreateClass(ctx, provisiondb.CreateClassParams{
			TenantID: p.TenantID, Name: req.GetName(), Provider: req.GetProvider(), Params: params, Credentials: sealed,
		})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, apierr.AlreadyExists("machine class %s exists", req.GetName())
		}
		if err != nil {
			return nil, err
		}
		pc, err := classProto(c)
		if err != nil {
			return nil, err
		}
		return &provisionmodulev1.CreateClassResponse{Class: pc}, nil
	})
}

// GetClass returns a class of the caller's tenant.
func (s *service) GetClass(ctx context.Context, req *provisionmodulev1.GetClassRequest) (*provisionmodulev1.GetClassResponse, error) {
	c, err := provisiondb.New(s.pool).GetClass(ctx, provisiondb.GetClassParams{TenantID: auth.Caller(ctx).TenantID, Name: req.GetName()})
	if err != nil {
		return nil, apierr.NotFoundIfNoRows(err, "machine class %q not found", req.GetName())
	}
	pc, err := classProto(c)
	if err != nil {
		return nil, err
	}
	return &provisionmodulev1.GetClassResponse{Class: pc}, nil
}

// ListClasses lists the caller tenant's classes by name.
func (s *service) ListClasses(ctx context.Context, req *provisionmodulev1.ListClassesRequest) (*provisionmodulev1.ListClassesResponse, error) {
	size, after, err := page.Of(req.GetPageSize(), req.GetPageToken(), "")
	if err != nil {
		return nil, err
	}
	rows, err := provisiondb.New(s.pool).ListClasses(ctx, provisiondb.ListClassesParams{TenantID: auth.Caller(ctx).TenantID, After: after, Lim: size + 1})
	if err != nil {
		return nil, err
	}
	rows, next := page.Next(rows, size, func(c provisiondb.ProvisionClass) string { return c.Name })
	res := &provisionmodulev1.ListClassesResponse{NextPageToken: next}
	for _, c := range rows {
		pc, err := classProto(c)
		if err != nil {
			return nil, err
		}
		res.Classes = append(res.Classes, pc)
	}
	return res, nil
}

// DeleteClass deletes a class that no machine uses any more.
func (s *service) DeleteClass(ctx context.Context, req *provisionmodulev1.DeleteClassRequest) (*provisionmodulev1.DeleteClassResponse, error) {
	p := auth.Caller(ctx)
	return admission.Do(ctx, s.admit, req, func(ctx context.Context, tx *admission.Tx) (*provisionmodulev1.DeleteClassResponse, error) {
		tx.Target("machineClass", req.GetName())
		q := provisiondb.New(tx.DB())
		key := provisiondb.GetClassParams{TenantID: p.TenantID, Name: req.GetName()}
		if _, err := q.GetClass(ctx, key); err != nil {
			return nil, apierr.NotFoundIfNoRows(err, "machine class %q not found", req.GetName())
		}
		n, err := q.DeleteClass(ctx, provisiondb.DeleteClassParams(key))
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, apierr.FailedPrecondition("machine class %s is used by machines that are not gone; delete them first", req.GetName())
		}
		return &provisionmodulev1.DeleteClassResponse{}, nil
	})
}
