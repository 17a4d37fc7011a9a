package config

import (
	"strings"
	"testing"
)

func TestModifiersAccepted(t *testing.T) {
	cfg, err := Parse([]byte(`
bufsize: {enabled: true, size: 1100}
nsid: {enabled: true, data: Use The Force}
header:
  query: [{action: set, flags: [rd]}]
  response: [{action: set, flags: [ra, AA]}, {action: clear, flags: [rd]}]
dns64: {enabled: true, prefix: "64:1337::/96", translateAll: true}
dns: {tcpReadTimeout: 15s, tcpWriteTimeout: 30s}
`))
	if err != nil {
		t.Fatal(err)
	}
	if p := cfg.DNS64Prefix().String(); p != "64:1337::/96" {
		t.Errorf("prefix %s", p)
	}
	if def := Default(); def.BufSize.Size != 1232 || def.DNS64.Prefix != "64:ff9b::/96" {
		t.Errorf("defaults %+v %+v, want CoreDNS's 1232 and 64:ff9b::/96", def.BufSize, def.DNS64)
	}
}

func TestModifiersRejected(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"bufsize: {enabled: true, size: 511}", "bufsize.size: must be between 512 and 4096, got 511"},
		{"bufsize: {size: 4097}", "bufsize.size: must be between 512 and 4096, got 4097"},
		{"nsid: {enabled: true, data: " + strings.Repeat("x", 256) + "}", "nsid.data: is 256 bytes, at most 255 are allowed"},
		{"header: {response: [{action: set, flags: [ad]}]}", `header.response[0].flags[0]: must be aa, ra or rd, got "ad"`},
		{"header: {query: [{action: toggle, flags: [rd]}]}", `header.query[0].action: must be set or clear, got "toggle"`},
		{"header: {query: [{action: set}]}", "header.query[0].flags: needs at least one flag"},
		{`dns64: {enabled: true, prefix: "64:ff9b::/80"}`, "dns64.prefix: 64:ff9b::/80: the length must be 32, 40, 48, 56, 64 or 96 (RFC 6052), got 80"},
		{`dns64: {prefix: "10.0.0.0/8"}`, `dns64.prefix: "10.0.0.0/8" is not an IPv6 prefix`},
		{"dns: {tcpReadTimeout: -1s}", "dns.tcpReadTimeout: must not be negative"},
		{"dns: {tcpWriteTimeout: -5s}", "dns.tcpWriteTimeout: must not be negative"},
	} {
		_, err := Parse([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.yaml, err, c.want)
		}
	}
}
