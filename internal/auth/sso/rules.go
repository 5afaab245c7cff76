package sso

import (
	"cmp"
	"slices"

	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
)

// Binding is what a method's binding rules grant a sign-in.
type Binding struct {
	// TenantID is the first matching rule's tenant: empty means the method's own tenant. Whether
	// another tenant is allowed (only below the method's, and only when that is the root tenant)
	// is for the caller to check.
	TenantID string
	// Roles are the union of the roles of every matching rule for TenantID, in enum order,
	// without owner (which no rule may grant) or unspecified.
	Roles []iamv1.Role
}

// Evaluate applies a method's binding rules to a sign-in's claims, in priority order (lowest
// first, ties in list order). A rule matches when all its selectors do (a rule without selectors
// matches every sign-in); a selector matches when the claim at its path (see ClaimPaths.Resolve)
// is one of its values or is a list holding one. ok is false when no rule matched: the sign-in
// gets no access. Rules are expected to have passed ValidateRules; an owner role in one is
// ignored all the same.
func Evaluate(rules []*authv1.BindingRule, paths ClaimPaths, claims Claims) (b Binding, ok bool) {
	ordered := slices.Clone(rules)
	slices.SortStableFunc(ordered, func(a, b *authv1.BindingRule) int {
		return cmp.Compare(a.GetPriority(), b.GetPriority())
	})
	var roles []iamv1.Role
	for _, r := range ordered {
		if r == nil || !matches(r, paths, claims) {
			continue
		}
		if !ok {
			b.TenantID, ok = r.GetTenantId(), true
		} else if r.GetTenantId() != b.TenantID {
			continue
		}
		for _, role := range r.GetRoles() {
			if role != iamv1.Role_ROLE_OWNER && role != iamv1.Role_ROLE_UNSPECIFIED && !slices.Contains(roles, role) {
				roles = append(roles, role)
			}
		}
	}
	slices.Sort(roles)
	b.Roles = roles
	return b, ok
}

func matches(r *authv1.BindingRule, paths ClaimPaths, claims Claims) bool {
	for _, s := range r.GetSelectors() {
		got := claims.Strings(paths.Resolve(s.GetClaim()))
		if !slices.ContainsFunc(s.GetValues(), func(v string) bool { return slices.Contains(got, v) }) {
			return false
		}
	}
	return true
}
