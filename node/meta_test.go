package node

import "testing"

// A member's metadata carries its role and remote address; an unknown
// flag (a later release's) reads as a member that owns nothing, as the
// pending flag reads to releases that knew only "1" and "0".
func TestMemberMeta(t *testing.T) {
	for _, c := range []struct {
		meta string
		role memberRole
		addr string
	}{
		{string(meta(roleOwner, "10.0.0.5:8090")), roleOwner, "10.0.0.5:8090"},
		{string(meta(rolePending, "10.0.0.6:8090")), rolePending, "10.0.0.6:8090"},
		{string(meta(roleLeaving, "10.0.0.4:8090")), roleLeaving, "10.0.0.4:8090"},
		{string(meta(roleNone, "10.0.0.7:8090")), roleNone, "10.0.0.7:8090"},
		{"1|10.0.0.8:8090", roleOwner, "10.0.0.8:8090"},
		{"x|10.0.0.9:8090", roleNone, "10.0.0.9:8090"},
		{"", roleNone, ""},
	} {
		role, addr := parseMeta([]byte(c.meta))
		if role != c.role || addr != c.addr {
			t.Errorf("parseMeta(%q) = %q, %q; want %q, %q", c.meta, role, addr, c.role, c.addr)
		}
	}
	if got := string(meta(rolePending, "h:1")); got != "p|h:1" {
		t.Fatalf("pending meta %q, want p|h:1", got)
	}
	if got := string(meta(roleLeaving, "h:1")); got != "l|h:1" {
		t.Fatalf("leaving meta %q, want l|h:1", got)
	}
}
