package corefile

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shardns/shardns/config"
)

// The README examples of CoreDNS's bufsize, nsid, header, dns64 and
// timeouts convert to their keys.
func TestConvertModifiers(t *testing.T) {
	cases := []struct {
		name, src string
		check     func(t *testing.T, cfg *config.Config)
	}{
		{"bufsize", ". {\n  bufsize 1100\n}\n", func(t *testing.T, cfg *config.Config) {
			if cfg.BufSize != (config.BufSizeConfig{Enabled: true, Size: 1100}) {
				t.Errorf("bufsize %+v", cfg.BufSize)
			}
		}},
		{"bufsize default", ". {\n  bufsize\n}\n", func(t *testing.T, cfg *config.Config) {
			if cfg.BufSize != (config.BufSizeConfig{Enabled: true, Size: 1232}) {
				t.Errorf("bufsize %+v", cfg.BufSize)
			}
		}},
		{"nsid", ". {\n  nsid Use The Force\n}\n", func(t *testing.T, cfg *config.Config) {
			if cfg.NSID != (config.NSIDConfig{Enabled: true, Data: "Use The Force"}) {
				t.Errorf("nsid %+v", cfg.NSID)
			}
		}},
		{"nsid hostname", ". {\n  nsid\n}\n", func(t *testing.T, cfg *config.Config) {
			if cfg.NSID != (config.NSIDConfig{Enabled: true}) {
				t.Errorf("nsid %+v, want enabled with the hostname", cfg.NSID)
			}
		}},
		{"header", ". {\n  header {\n    response set ra aa\n    response clear rd\n    QUERY Set RD\n  }\n}\n", func(t *testing.T, cfg *config.Config) {
			want := config.HeaderConfig{
				Query:    []config.HeaderRule{{Action: "set", Flags: []string{"rd"}}},
				Response: []config.HeaderRule{{Action: "set", Flags: []string{"ra", "aa"}}, {Action: "clear", Flags: []string{"rd"}}},
			}
			if !reflect.DeepEqual(cfg.Header, want) {
				t.Errorf("header %+v, want %+v", cfg.Header, want)
			}
		}},
		{"dns64 prefix argument", ". {\n  dns64 64:1337::/96\n}\n", func(t *testing.T, cfg *config.Config) {
			if cfg.DNS64 != (config.DNS64Config{Enabled: true, Prefix: "64:1337::/96"}) {
				t.Errorf("dns64 %+v", cfg.DNS64)
			}
		}},
		{"dns64 block", ". {\n  dns64 {\n    prefix 64:1337::/96\n    translate_all\n    allow_ipv4\n  }\n}\n", func(t *testing.T, cfg *config.Config) {
			if cfg.DNS64 != (config.DNS64Config{Enabled: true, Prefix: "64:1337::/96", TranslateAll: true, AllowIPv4: true}) {
				t.Errorf("dns64 %+v", cfg.DNS64)
			}
		}},
		{"timeouts", ".:1053 {\n  timeouts {\n    read 15s\n    write 30\n    idle 1m\n    maxtcpqueries 128\n  }\n}\n", func(t *testing.T, cfg *config.Config) {
			d := cfg.DNS
			if d.TCPReadTimeout.D() != 15*time.Second || d.TCPWriteTimeout.D() != 30*time.Second ||
				d.TCPIdleTimeout.D() != time.Minute || d.TCPMaxQueries != 128 {
				t.Errorf("dns %+v", d)
			}
		}},
		{"timeouts unlimited queries", ". {\n  timeouts {\n    maxtcpqueries -1\n  }\n}\n", func(t *testing.T, cfg *config.Config) {
			if cfg.DNS.TCPMaxQueries != 0 {
				t.Errorf("tcpMaxQueries %d, want 0 (no bound)", cfg.DNS.TCPMaxQueries)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := convert(t, c.src)
			for _, f := range r.Findings {
				if f.Unmapped {
					t.Errorf("unmapped: %s", f.Format("Corefile"))
				}
			}
			c.check(t, r.Config)
			if _, err := r.YAML(); err != nil {
				t.Error(err)
			}
		})
	}
}

// What CoreDNS refuses to start on is reported at its line.
func TestConvertModifiersRejected(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{". {\n  bufsize 4097\n}\n", "Corefile:2: bufsize 4097: the size must be a number from 512 to 4096"},
		{". {\n  bufsize 100\n}\n", "Corefile:2: bufsize 100: the size must be a number from 512 to 4096"},
		{". {\n  nsid " + strings.Repeat("x", 256) + "\n}\n", "Corefile:2: nsid: the data is 256 bytes, shardns sends at most 255"},
		{". {\n  header {\n    response set ad\n  }\n}\n", "Corefile:3: header response set ad: flag ad is not aa, ra or rd (the flags CoreDNS's header changes)"},
		{". {\n  header {\n    answer set aa\n  }\n}\n", "Corefile:3: header answer set aa: the selector must be query or response"},
		{". {\n  header\n}\n", "Corefile:2: header needs at least one rule in its block"},
		{". {\n  dns64 64:ff9b::/80\n}\n", "Corefile:2: dns64 prefix 64:ff9b::/80: the length must be 32, 40, 48, 56, 64 or 96 (RFC 6052), got 80"},
		{". {\n  dns64 {\n    upstream\n  }\n}\n", `Corefile:3: dns64 option "upstream" has no shardns equivalent`},
		{". {\n  timeouts {\n    read -5s\n  }\n}\n", "Corefile:3: timeouts read -5s: must be between 1s and 24h"},
		{". {\n  timeouts {\n    idle 25h\n  }\n}\n", "Corefile:3: timeouts idle 25h: must be between 1s and 24h"},
		{". {\n  timeouts {\n    maxtcpqueries 0\n  }\n}\n", "Corefile:3: timeouts maxtcpqueries 0: must be -1 (no bound) or a positive number"},
		{". {\n  timeouts\n}\n", "Corefile:2: timeouts needs a block of read, write, idle or maxtcpqueries and nothing else"},
	} {
		if r := convert(t, c.src); !hasFinding(r, c.want) {
			t.Errorf("%q: findings %q, want %q", c.src, findings(r), c.want)
		}
	}
}
