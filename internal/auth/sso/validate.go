package sso

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/internal/apierr"
)

// Bounds of a method's binding rules, so that evaluating them stays cheap.
const (
	MaxRules          = 64
	MaxSelectors      = 16
	MaxSelectorValues = 64
	MaxClaimPath      = 128
	MaxSelectorValue  = 256
)

// ValidateRules checks binding rules as the field "rules"; see ValidateRulesField.
func ValidateRules(rules []*authv1.BindingRule) error {
	return ValidateRulesField("rules", rules)
}

// ValidateRulesField checks binding rules before they are stored: at most MaxRules, unique
// priorities, at most MaxSelectors selectors a rule, each with a claim path (non-empty dot-separated
// names, at most MaxClaimPath characters) and 1 to MaxSelectorValues non-empty values of at most
// MaxSelectorValue characters; a tenant id, when set, that is a UUID; and at least one role, each
// known, not repeated and not owner (no rule may grant owner). It reports every bad field as an
// apierr.InvalidArgument joined with apierr.Join, named below field
// ("auth_method.rules[2].selectors[0].claim" for field "auth_method.rules").
func ValidateRulesField(field string, rules []*authv1.BindingRule) error {
	if len(rules) > MaxRules {
		return apierr.InvalidArgument(field, "must hold at most %d rules, got %d", MaxRules, len(rules))
	}
	var errs []error
	bad := func(f, format string, args ...any) {
		errs = append(errs, apierr.InvalidArgument(f, format, args...))
	}
	priorities := map[int32]int{}
	for i, r := range rules {
		rf := fmt.Sprintf("%s[%d]", field, i)
		if r == nil {
			bad(rf, "must be a rule")
			continue
		}
		if j, dup := priorities[r.GetPriority()]; dup {
			bad(rf+".priority", "must be unique, but %d is also %s[%d]'s", r.GetPriority(), field, j)
		} else {
			priorities[r.GetPriority()] = i
		}
		if len(r.GetSelectors()) > MaxSelectors {
			bad(rf+".selectors", "must hold at most %d selectors, got %d", MaxSelectors, len(r.GetSelectors()))
		} else {
			for j, s := range r.GetSelectors() {
				validateSelector(fmt.Sprintf("%s.selectors[%d]", rf, j), s, bad)
			}
		}
		if t := r.GetTenantId(); t != "" {
			if _, err := apierr.ParseOptionalID(rf+".tenant_id", t); err != nil {
				errs = append(errs, err)
			}
		}
		validateRoles(rf+".roles", r.GetRoles(), bad)
	}
	return apierr.Join(errs...)
}

func validateSelector(sf string, s *authv1.ClaimSelector, bad func(f, format string, args ...any)) {
	if s == nil {
		bad(sf, "must be a selector")
		return
	}
	if msg := CheckClaimPath(s.GetClaim()); msg != "" {
		bad(sf+".claim", "%s", msg)
	}
	values := s.GetValues()
	switch {
	case len(values) == 0:
		bad(sf+".values", "must hold at least one value")
	case len(values) > MaxSelectorValues:
		bad(sf+".values", "must hold at most %d values, got %d", MaxSelectorValues, len(values))
	default:
		for k, v := range values {
			switch {
			case v == "":
				bad(fmt.Sprintf("%s.values[%d]", sf, k), "must not be empty")
			case utf8.RuneCountInString(v) > MaxSelectorValue:
				bad(fmt.Sprintf("%s.values[%d]", sf, k), "must be at most %d characters", MaxSelectorValue)
			}
		}
	}
}

// CheckClaimPath says what is wrong with a claim path (a selector's, or a method's claim paths),
// or "" when it is fine.
func CheckClaimPath(p string) string {
	switch {
	case p == "":
		return "must name a claim"
	case utf8.RuneCountInString(p) > MaxClaimPath:
		return fmt.Sprintf("must be at most %d characters", MaxClaimPath)
	case strings.HasPrefix(p, ".") || strings.HasSuffix(p, ".") || strings.Contains(p, ".."):
		return fmt.Sprintf("must be dot-separated claim names, got %q", p)
	case strings.ContainsFunc(p, func(r rune) bool { return unicode.IsControl(r) || r == utf8.RuneError }):
		return "must not contain control characters"
	}
	return ""
}

func validateRoles(rf string, roles []iamv1.Role, bad func(f, format string, args ...any)) {
	if len(roles) == 0 {
		bad(rf, "must grant at least one role")
		return
	}
	seen := map[iamv1.Role]bool{}
	for k, role := range roles {
		f := fmt.Sprintf("%s[%d]", rf, k)
		switch {
		case role == iamv1.Role_ROLE_OWNER:
			bad(f, "owner cannot be granted by a rule")
		case role == iamv1.Role_ROLE_UNSPECIFIED:
			bad(f, "must name a role")
		case iamv1.Role_name[int32(role)] == "":
			bad(f, "unknown role %d", role)
		case seen[role]:
			bad(f, "repeats %s", role)
		}
		seen[role] = true
	}
}
