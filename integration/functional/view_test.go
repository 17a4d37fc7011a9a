package functional

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/shardns/shardns/integration/harness"
)

// viewCIDRCorefile is CoreDNS's view README example on loopback: each
// client network gets test. from its own block's hosts, IPv6 clients
// from theirs, and every other client from the unfiltered block's.
const viewCIDRCorefile = `.:{{dns}} {
    bind 127.0.0.1 ::1
    view example1 {
        expr incidr(client_ip(), '127.0.0.2/32')
    }
    hosts {
        1.1.1.1 test
    }
}

.:{{dns}} {
    bind 127.0.0.1 ::1
    view example2 {
        expr incidr(client_ip(), '127.0.0.0/30')
    }
    hosts {
        2.2.2.2 test
    }
}

.:{{dns}} {
    bind 127.0.0.1 ::1
    view v6_example1 {
        expr incidr(client_ip(), '::1/128')
    }
    hosts {
        2001:0DB8::1 test
    }
}

.:{{dns}} {
    bind 127.0.0.1 ::1
    hosts {
        3.3.3.3 test
    }
}
`

// Split DNS by the client's address answers as CoreDNS 1.15 does from
// the same Corefile, over UDP and TCP: the first view whose CIDR holds
// the client, else the unfiltered block.
func TestViewCIDRSplitBesideCoreDNS(t *testing.T) {
	shardns := serveCorefile(t, harness.RenderCorefile(t, viewCIDRCorefile, nil))
	run := harness.RenderCorefile(t, viewCIDRCorefile, nil) // the same Corefile on a port of its own
	coredns := harness.StartCoreDNS(t, harness.CoreDNSOptions{Corefile: run.Text, Addr: run.Addrs["dns"], Probe: "test."})
	cases := []struct {
		from  string
		qtype uint16
		want  string
	}{
		{"127.0.0.2", dns.TypeA, "NOERROR [test.\t3600\tIN\tA\t1.1.1.1] [] ede=none"},
		{"127.0.0.1", dns.TypeA, "NOERROR [test.\t3600\tIN\tA\t2.2.2.2] [] ede=none"},
		{"127.0.0.3", dns.TypeA, "NOERROR [test.\t3600\tIN\tA\t2.2.2.2] [] ede=none"},
		{"127.0.0.9", dns.TypeA, "NOERROR [test.\t3600\tIN\tA\t3.3.3.3] [] ede=none"},
		{"::1", dns.TypeAAAA, "NOERROR [test.\t3600\tIN\tAAAA\t2001:db8::1] [] ede=none"},
		{"::1", dns.TypeA, "NOERROR [] [] ede=none"}, // the view's hosts have the name, not the type
		{"127.0.0.9", dns.TypeAAAA, "NOERROR [] [] ede=none"},
	}
	for _, c := range cases {
		for _, server := range []struct{ name, addr string }{{"shardns", shardns}, {"coredns", coredns}} {
			addr := server.addr
			if c.from == "::1" {
				_, port, _ := net.SplitHostPort(addr)
				addr = net.JoinHostPort("::1", port)
			}
			for _, proto := range []string{"udp", "tcp"} {
				got, err := askFrom(addr, proto, c.from, "test.", c.qtype)
				if err != nil {
					t.Fatalf("%s over %s from %s: %v", server.name, proto, c.from, err)
				}
				if got != c.want {
					t.Errorf("%s over %s, test. %s from %s:\n got %s\nwant %s", server.name, proto,
						dns.TypeToString[c.qtype], c.from, got, c.want)
				}
			}
		}
	}
}

// serveCorefile runs `shardns serve --corefile` on run and returns the
// address it listens on.
func serveCorefile(t *testing.T, run harness.Corefile) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(path, []byte(run.Text), 0o644); err != nil {
		t.Fatal(err)
	}
	return harness.Start(t, harness.Options{Args: []string{"--corefile", path}}).Addr
}

// viewForwardCorefiles are the README's forward splits: by the question
// type, and by a regular expression on the name.
var viewForwardCorefiles = map[string]string{
	"type": `.:{{dns}} {
    bind 127.0.0.1
    view example {
        expr type() in ['A', 'AAAA']
    }
    forward . {{split}}
}

.:{{dns}} {
    bind 127.0.0.1
    forward . {{other}}
}
`,
	"name": `.:{{dns}} {
    bind 127.0.0.1
    view example {
        expr name() matches '^abc\\..*\\.example\\.test\\.$'
    }
    forward . {{split}}
}

.:{{dns}} {
    bind 127.0.0.1
    forward . {{other}}
}
`,
}

// A view forwards to its own upstreams, the unfiltered block to its
// own, as CoreDNS 1.15 does from the same Corefile, over UDP and TCP.
func TestViewForwardSplitBesideCoreDNS(t *testing.T) {
	split := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1", "www.example.test. 300 IN TXT split",
		"abc.x.example.test. 300 IN A 192.0.2.11", "abd.x.example.test. 300 IN A 192.0.2.12")
	other := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.2", "www.example.test. 300 IN TXT other",
		"abc.x.example.test. 300 IN A 192.0.2.21", "abd.x.example.test. 300 IN A 192.0.2.22")
	want := map[string][]harness.Question{
		"type": {
			{Name: "www.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"www.example.test.\t300\tIN\tA\t192.0.2.1"}},
			{Name: "www.example.test.", Qtype: dns.TypeTXT, Rcode: dns.RcodeSuccess, Answer: []string{"www.example.test.\t300\tIN\tTXT\t\"other\""}},
		},
		"name": {
			{Name: "abc.x.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"abc.x.example.test.\t300\tIN\tA\t192.0.2.11"}},
			{Name: "ABC.x.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"ABC.x.example.test.\t300\tIN\tA\t192.0.2.11"}},
			{Name: "abd.x.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"abd.x.example.test.\t300\tIN\tA\t192.0.2.22"}},
			{Name: "www.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"www.example.test.\t300\tIN\tA\t192.0.2.2"}},
		},
	}
	for name, tmpl := range viewForwardCorefiles {
		t.Run(name, func(t *testing.T) {
			vars := map[string]string{"split": split.Addr, "other": other.Addr}
			shardns := serveCorefile(t, harness.RenderCorefile(t, tmpl, vars))
			run := harness.RenderCorefile(t, tmpl, vars) // the same Corefile on a port of its own
			coredns := harness.StartCoreDNS(t, harness.CoreDNSOptions{Corefile: run.Text, Addr: run.Addrs["dns"], Probe: "www.example.test."})
			harness.AskBoth(t, shardns, coredns, want[name])
		})
	}
}

// A view expression that does not compile stops shardns at its line, as
// it stops CoreDNS.
func TestViewBadExpressionStopsServe(t *testing.T) {
	run := harness.RenderCorefile(t, ".:{{dns}} {\n    view broken {\n        expr name(\n    }\n}\n\n.:{{dns}} {\n}\n", nil)
	_, findings := convertCorefile(t, run.Text, false)
	if !strings.Contains(findings, "Corefile:3: view broken: expression") {
		t.Errorf("convert said:\n%s\nwant an error at Corefile:3", findings)
	}
}
