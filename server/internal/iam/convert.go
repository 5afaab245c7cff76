package iam

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/better-compute/better-compute/gen/db"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/internal/auth"
)

var kindToProto = map[string]iamv1.PrincipalKind{
	"user":            iamv1.PrincipalKind_PRINCIPAL_KIND_USER,
	"service_account": iamv1.PrincipalKind_PRINCIPAL_KIND_SERVICE_ACCOUNT,
}

func kindFromProto(k iamv1.PrincipalKind) (string, bool) {
	for s, v := range kindToProto {
		if v == k {
			return s, true
		}
	}
	return "", false
}

func optionalTime(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}

func tenantToProto(t db.Tenant) *iamv1.Tenant {
	out := &iamv1.Tenant{
		Id: t.ID.String(), Name: t.Name, DisplayName: t.DisplayName, Root: t.IsRoot,
		CreateTime: timestamppb.New(t.CreatedAt), SuspendTime: optionalTime(t.SuspendedAt), DeleteTime: optionalTime(t.DeletedAt),
	}
	if t.ParentID != nil {
		out.ParentId = t.ParentID.String()
	}
	return out
}

func principalToProto(p db.Principal) *iamv1.Principal {
	return &iamv1.Principal{
		Id: p.ID.String(), TenantId: p.TenantID.String(), Kind: kindToProto[p.Kind],
		Name: p.Name, Email: p.Email, CreateTime: timestamppb.New(p.CreatedAt),
	}
}

func apiKeyToProto(k db.ApiKey) *iamv1.ApiKey {
	out := &iamv1.ApiKey{
		Id: k.ID, TenantId: k.TenantID.String(), PrincipalId: k.PrincipalID.String(), Name: k.Name,
		ExpireTime: optionalTime(k.ExpiresAt), LastUsedTime: optionalTime(k.LastUsedAt),
		CreateTime: timestamppb.New(k.CreatedAt), CreatedByOwner: k.CreatedByOwner,
	}
	if k.CreatedBy != nil {
		out.CreatorPrincipalId = k.CreatedBy.String()
	}
	return out
}

func roleBindingToProto(b db.RoleBinding) *iamv1.RoleBinding {
	return &iamv1.RoleBinding{
		Id: b.ID.String(), TenantId: b.TenantID.String(), PrincipalId: b.PrincipalID.String(),
		Role: auth.Role(b.Role).Proto(), CreateTime: timestamppb.New(b.CreatedAt),
	}
}
