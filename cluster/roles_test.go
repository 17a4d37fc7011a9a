package cluster

import (
	"bytes"
	"testing"
)

// The metadata bytes are read by other releases during a rolling update:
// they are pinned here byte for byte.
func TestEncodeMetaGolden(t *testing.T) {
	for _, c := range []struct {
		role Role
		want []byte
	}{
		{RoleNone, []byte{'0', '|', '1', '0', '.', '0', '.', '0', '.', '5', ':', '8', '0', '9', '0'}},
		{RoleOwner, []byte{0x31, 0x7c, 0x31, 0x30, 0x2e, 0x30, 0x2e, 0x30, 0x2e, 0x35, 0x3a, 0x38, 0x30, 0x39, 0x30}},
		{RolePending, []byte{0x70, 0x7c, 0x31, 0x30, 0x2e, 0x30, 0x2e, 0x30, 0x2e, 0x35, 0x3a, 0x38, 0x30, 0x39, 0x30}},
		{RoleLeaving, []byte{0x6c, 0x7c, 0x31, 0x30, 0x2e, 0x30, 0x2e, 0x30, 0x2e, 0x35, 0x3a, 0x38, 0x30, 0x39, 0x30}},
	} {
		if got := EncodeMeta(c.role, "10.0.0.5:8090"); !bytes.Equal(got, c.want) {
			t.Errorf("EncodeMeta(%q) = %q, want %q", c.role, got, c.want)
		}
	}
}

// A member's metadata carries its role and remote address; an unknown
// flag (a later release's) reads as a member that owns nothing, as the
// pending flag reads to releases that knew only "1" and "0".
func TestDecodeMeta(t *testing.T) {
	for _, c := range []struct {
		meta string
		role Role
		addr string
	}{
		{"1|10.0.0.8:8090", RoleOwner, "10.0.0.8:8090"},
		{"p|10.0.0.6:8090", RolePending, "10.0.0.6:8090"},
		{"l|10.0.0.4:8090", RoleLeaving, "10.0.0.4:8090"},
		{"0|10.0.0.7:8090", RoleNone, "10.0.0.7:8090"},
		{"x|10.0.0.9:8090", RoleNone, "10.0.0.9:8090"},
		{"[::1]:8090", RoleNone, ""},
		{"", RoleNone, ""},
	} {
		role, addr := DecodeMeta([]byte(c.meta))
		if role != c.role || addr != c.addr {
			t.Errorf("DecodeMeta(%q) = %q, %q; want %q, %q", c.meta, role, addr, c.role, c.addr)
		}
	}
	for _, r := range []Role{RoleNone, RoleOwner, RolePending, RoleLeaving} {
		if got, addr := DecodeMeta(EncodeMeta(r, "h:1")); got != r || addr != "h:1" {
			t.Errorf("round trip of %q: %q, %q", r, got, addr)
		}
	}
}

// A node-local process reads the roles a replica tells it; an owner that
// is leaving is told as an owner.
func TestRoleOf(t *testing.T) {
	for _, c := range []struct {
		owner, pending bool
		want           Role
	}{
		{false, false, RoleNone},
		{true, false, RoleOwner},
		{false, true, RolePending},
		{true, true, RoleOwner},
	} {
		if got := RoleOf(c.owner, c.pending); got != c.want {
			t.Errorf("RoleOf(%v, %v) = %q, want %q", c.owner, c.pending, got, c.want)
		}
	}
	if !RoleOwner.OwnsZones() || !RoleLeaving.OwnsZones() || RolePending.OwnsZones() || RoleNone.OwnsZones() {
		t.Error("only owners and leaving owners own zones")
	}
}
