package identity

import "testing"

func TestHasRole(t *testing.T) {
	id := &Identity{Roles: []string{RoleAuditor, "dev"}}
	if !id.HasRole(RoleAuditor) || !id.HasRole("dev") {
		t.Fatal("a held role is not reported")
	}
	if id.HasRole(RoleApprover) || id.HasRole("") || id.HasRole("Auditor") {
		t.Fatal("a role not held is reported (roles compare exactly)")
	}
	var none *Identity
	if none.HasRole(RoleAuditor) {
		t.Fatal("no identity holds a role")
	}
}
