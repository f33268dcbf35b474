package store

import "testing"

func TestSessionLockKeysKeepTenantAndSessionApart(t *testing.T) {
	pairs := [][2]string{{"acme", "s-1"}, {"acmes-1", ""}, {"acme", "s-1 "}, {"", "acmes-1"}, {"acm", "es-1"}, {"globex", "s-1"}}
	seen := map[int64][2]string{}
	for _, p := range pairs {
		k := sessionLockKey(p[0], p[1])
		if other, dup := seen[k]; dup {
			t.Fatalf("sessions %q and %q share lock key %d", other, p, k)
		}
		seen[k] = p
	}
	if sessionLockKey("acme", "s-1") != sessionLockKey("acme", "s-1") {
		t.Fatal("the lock key of a session is not stable")
	}
}
