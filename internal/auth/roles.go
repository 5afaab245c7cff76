package auth

import (
	"fmt"
	"strings"

	iamv1 "github.com/better-compute/better-compute/gen/go/bettercompute/iam/v1"
)

// Role is a named set of permissions a principal holds in its tenant.
type Role string

// The roles, from most to least powerful.
const (
	RoleOwner    Role = "owner"
	RoleAdmin    Role = "admin"
	RoleOperator Role = "operator"
	RoleViewer   Role = "viewer"
)

// Roles lists every role.
var Roles = []Role{RoleOwner, RoleAdmin, RoleOperator, RoleViewer}

// Permissions are "<group>.<verb>". A role grants them by pattern: "*" grants everything,
// "*.read" every read. Verbs: read (see), operate (day-to-day actions such as cordon, drain and
// commands), write, create and delete (change configuration and IAM), own (grant and remove
// owners). "self.read" (who am I) is granted by every role.
var rolePatterns = map[Role][]string{
	RoleOwner:    {"*"},
	RoleAdmin:    {"*.read", "*.operate", "*.write", "*.create", "*.delete"},
	RoleOperator: {"*.read", "*.operate"},
	RoleViewer:   {"*.read"},
}

// ParseRole accepts a role's name.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if _, ok := rolePatterns[r]; !ok {
		return "", fmt.Errorf("unknown role %q (want owner, admin, operator or viewer)", s)
	}
	return r, nil
}

// Grants reports whether the role includes permission.
func (r Role) Grants(permission string) bool {
	group, verb, ok := strings.Cut(permission, ".")
	if !ok {
		return false
	}
	for _, p := range rolePatterns[r] {
		pg, pv, _ := strings.Cut(p, ".")
		if p == "*" || ((pg == "*" || pg == group) && (pv == "*" || pv == verb)) {
			return true
		}
	}
	return false
}

// roleProtos are the roles as the API names them.
var roleProtos = map[Role]iamv1.Role{
	RoleOwner:    iamv1.Role_ROLE_OWNER,
	RoleAdmin:    iamv1.Role_ROLE_ADMIN,
	RoleOperator: iamv1.Role_ROLE_OPERATOR,
	RoleViewer:   iamv1.Role_ROLE_VIEWER,
}

// Proto is the role as the API names it.
func (r Role) Proto() iamv1.Role { return roleProtos[r] }

// RoleFromProto is the role the API names; false for an unspecified or unknown one.
func RoleFromProto(p iamv1.Role) (Role, bool) {
	for r, v := range roleProtos {
		if v == p {
			return r, true
		}
	}
	return "", false
}
