package sso

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	authv1 "github.com/better-compute/better-compute/gen/go/bettercompute/auth/v1"
	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
	"github.com/better-compute/better-compute/internal/apierr"
)

func mustClaims(t *testing.T, s string) Claims {
	t.Helper()
	c, err := decodeClaims([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func sel(claim string, values ...string) *authv1.ClaimSelector {
	return &authv1.ClaimSelector{Claim: claim, Values: values}
}

func rule(priority int32, tenant string, roles []iamv1.Role, selectors ...*authv1.ClaimSelector) *authv1.BindingRule {
	return &authv1.BindingRule{Priority: priority, TenantId: tenant, Roles: roles, Selectors: selectors}
}

var (
	admin    = iamv1.Role_ROLE_ADMIN
	operator = iamv1.Role_ROLE_OPERATOR
	viewer   = iamv1.Role_ROLE_VIEWER
	owner    = iamv1.Role_ROLE_OWNER
)

func TestEvaluate(t *testing.T) {
	t.Parallel()
	claims := `{"sub":"u","email":"ann@example.com","groups":["dev","ops"],"team":"blue",
		"realm_access":{"roles":["admin"]},"https://example.com/groups":["sre"],"mail":"x@example.com",
		"org_id":42,"verified":true}`
	tests := []struct {
		name   string
		rules  []*authv1.BindingRule
		paths  ClaimPaths
		ok     bool
		tenant string
		roles  []iamv1.Role
	}{
		{"no rules", nil, ClaimPaths{}, false, "", nil},
		{"no match", []*authv1.BindingRule{rule(1, "", []iamv1.Role{admin}, sel("groups", "finance"))}, ClaimPaths{}, false, "", nil},
		{"match all", []*authv1.BindingRule{rule(1, "", []iamv1.Role{viewer})}, ClaimPaths{}, true, "", []iamv1.Role{viewer}},
		{"list claim", []*authv1.BindingRule{rule(1, "", []iamv1.Role{operator}, sel("groups", "ops", "x"))}, ClaimPaths{}, true, "", []iamv1.Role{operator}},
		{"string claim", []*authv1.BindingRule{rule(1, "", []iamv1.Role{operator}, sel("team", "red", "blue"))}, ClaimPaths{}, true, "", []iamv1.Role{operator}},
		{"number and bool claims", []*authv1.BindingRule{rule(1, "", []iamv1.Role{viewer}, sel("org_id", "42"), sel("verified", "true"))}, ClaimPaths{}, true, "", []iamv1.Role{viewer}},
		{"all selectors must match", []*authv1.BindingRule{rule(1, "", []iamv1.Role{admin}, sel("groups", "dev"), sel("team", "red"))}, ClaimPaths{}, false, "", nil},
		{"nested path", []*authv1.BindingRule{rule(1, "", []iamv1.Role{admin}, sel("realm_access.roles", "admin"))}, ClaimPaths{}, true, "", []iamv1.Role{admin}},
		{"dotted claim name", []*authv1.BindingRule{rule(1, "", []iamv1.Role{admin}, sel("https://example.com/groups", "sre"))}, ClaimPaths{}, true, "", []iamv1.Role{admin}},
		{"method's groups path", []*authv1.BindingRule{rule(1, "", []iamv1.Role{admin}, sel("groups", "admin"))}, ClaimPaths{Groups: "realm_access.roles"}, true, "", []iamv1.Role{admin}},
		{"method's email path", []*authv1.BindingRule{rule(1, "", []iamv1.Role{viewer}, sel("email", "x@example.com"))}, ClaimPaths{Email: "mail"}, true, "", []iamv1.Role{viewer}},
		{"missing claim", []*authv1.BindingRule{rule(1, "", []iamv1.Role{viewer}, sel("nope", "x"))}, ClaimPaths{}, false, "", nil},
		{"first match by priority gives the tenant, union of its roles", []*authv1.BindingRule{
			rule(30, "t2", []iamv1.Role{admin}, sel("groups", "dev")),
			rule(10, "t1", []iamv1.Role{viewer}, sel("groups", "dev")),
			rule(20, "t1", []iamv1.Role{operator, viewer}, sel("groups", "ops")),
			rule(5, "t0", []iamv1.Role{admin}, sel("groups", "finance")),
		}, ClaimPaths{}, true, "t1", []iamv1.Role{operator, viewer}},
		{"owner ignored", []*authv1.BindingRule{rule(1, "", []iamv1.Role{owner, viewer})}, ClaimPaths{}, true, "", []iamv1.Role{viewer}},
		{"owner only", []*authv1.BindingRule{rule(1, "", []iamv1.Role{owner})}, ClaimPaths{}, true, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, ok := Evaluate(tt.rules, tt.paths, mustClaims(t, claims))
			if ok != tt.ok || b.TenantID != tt.tenant || !slices.Equal(b.Roles, tt.roles) {
				t.Fatalf("Evaluate = %+v, %v; want tenant %q roles %v, %v", b, ok, tt.tenant, tt.roles, tt.ok)
			}
		})
	}
}

func TestValidateRules(t *testing.T) {
	t.Parallel()
	good := []*authv1.BindingRule{
		rule(1, "", []iamv1.Role{admin}, sel("groups", "admins")),
		rule(2, "0b8e4a53-4f9a-4d4e-9d2f-2b1f6f0c9a11", []iamv1.Role{viewer, operator}),
	}
	if err := ValidateRules(good); err != nil {
		t.Fatalf("good rules: %v", err)
	}
	bad := []*authv1.BindingRule{
		rule(1, "", []iamv1.Role{admin}, sel("", "x")),
		rule(1, "not-a-uuid", []iamv1.Role{owner, viewer, viewer, iamv1.Role(99)}, sel("a..b", "x"), sel("g"), sel("g", "", strings.Repeat("v", MaxSelectorValue+1))),
		rule(3, "", nil, sel(strings.Repeat("c", MaxClaimPath+1), "x")),
	}
	err := ValidateRulesField("auth_method.rules", bad)
	var ae *apierr.Error
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want an apierr.Error", err)
	}
	var fields []string
	for _, v := range ae.Violations() {
		fields = append(fields, v.Field)
	}
	want := []string{
		"auth_method.rules[0].selectors[0].claim",
		"auth_method.rules[1].priority",
		"auth_method.rules[1].selectors[0].claim",
		"auth_method.rules[1].selectors[1].values",
		"auth_method.rules[1].selectors[2].values[0]",
		"auth_method.rules[1].selectors[2].values[1]",
		"auth_method.rules[1].tenant_id",
		"auth_method.rules[1].roles[0]",
		"auth_method.rules[1].roles[2]",
		"auth_method.rules[1].roles[3]",
		"auth_method.rules[2].selectors[0].claim",
		"auth_method.rules[2].roles",
	}
	if !slices.Equal(fields, want) {
		t.Fatalf("fields:\n%s\nwant:\n%s\n(%v)", strings.Join(fields, "\n"), strings.Join(want, "\n"), err)
	}
	if !strings.Contains(err.Error(), "owner cannot be granted") {
		t.Errorf("err = %v, want it to say owner cannot be granted", err)
	}

	many := make([]*authv1.BindingRule, MaxRules+1)
	for i := range many {
		many[i] = rule(int32(i), "", []iamv1.Role{viewer})
	}
	if err := ValidateRules(many); err == nil || !strings.HasPrefix(err.Error(), "rules:") {
		t.Fatalf("too many rules: err = %v", err)
	}
	sels := make([]*authv1.ClaimSelector, MaxSelectors+1)
	vals := make([]string, MaxSelectorValues+1)
	for i := range sels {
		sels[i] = sel("g", "x")
	}
	for i := range vals {
		vals[i] = "v"
	}
	err = ValidateRules([]*authv1.BindingRule{
		rule(1, "", []iamv1.Role{viewer}, sels...),
		rule(2, "", []iamv1.Role{viewer}, sel("g", vals...)),
	})
	if !errors.As(err, &ae) || len(ae.Violations()) != 2 || ae.Violations()[0].Field != "rules[0].selectors" ||
		ae.Violations()[1].Field != "rules[1].selectors[0].values" {
		t.Fatalf("too many selectors and values: err = %v", err)
	}
}

func TestClaims(t *testing.T) {
	t.Parallel()
	c := mustClaims(t, `{"sub":"s","iss":"i","a":{"b":{"c":"deep"}},"a.b":{"x":"dotted"},
		"list":["x",1,true,{"no":1}],"big":12345678901234567890,"obj":{"k":"v"}}`)
	if v, ok := c.Lookup("a.b.c"); !ok || v != "deep" {
		t.Errorf("a.b.c = %v, %v", v, ok)
	}
	if v, ok := c.Lookup("a.b.x"); !ok || v != "dotted" {
		t.Errorf("a.b.x = %v, %v", v, ok)
	}
	if _, ok := c.Lookup("a.nope"); ok {
		t.Error("a.nope found")
	}
	if got := c.Strings("list"); !slices.Equal(got, []string{"x", "1", "true"}) {
		t.Errorf("list = %q", got)
	}
	if got := c.Strings("big"); !slices.Equal(got, []string{"12345678901234567890"}) {
		t.Errorf("big = %q (numbers must keep their spelling)", got)
	}
	if got := c.Strings("obj"); got != nil {
		t.Errorf("obj = %q, want nil", got)
	}
	if c.Subject() != "s" || c.Issuer() != "i" {
		t.Errorf("Subject, Issuer = %q, %q", c.Subject(), c.Issuer())
	}
	if _, ok := c["big"].(json.Number); !ok {
		t.Errorf("numbers are %T, want json.Number", c["big"])
	}
	if _, err := decodeClaims([]byte(`[1]`)); !errors.Is(err, ErrMalformed) {
		t.Errorf("list payload: err = %v", err)
	}
}
