package functional

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// aclCorefile holds the shapes of CoreDNS's acl README: a type blocked
// from a network in one zone, a type filtered in another, and a list of
// every name that drops one client, allows two and refuses the rest.
const aclCorefile = `.:{{dns}} {
    bind 127.0.0.1
    acl blocked.test {
        block type A net 127.0.0.0/24
    }
    acl filtered.test {
        filter type A net 127.0.0.0/24
    }
    acl {
        drop net 127.0.0.4
        allow net 127.0.0.1 127.0.0.2
        block
    }
    hosts {
        192.0.2.1 www.blocked.test
        192.0.2.2 www.filtered.test
        192.0.2.4 www.open.test
    }
}
`

// The access lists answer clients by their source address, over UDP and
// TCP, as CoreDNS 1.15 does from the same Corefile: allowed clients get
// records, blocked ones REFUSED with extended error 15, filtered ones an
// empty NOERROR with extended error 17, dropped ones nothing.
func TestACLBesideCoreDNS(t *testing.T) {
	run := harness.RenderCorefile(t, aclCorefile, nil)
	path := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(path, []byte(run.Text), 0o644); err != nil {
		t.Fatal(err)
	}
	shardns := harness.Start(t, harness.Options{Args: []string{"--corefile", path}}).Addr
	coreRun := harness.RenderCorefile(t, aclCorefile, nil) // the same Corefile on ports of its own
	coredns := harness.StartCoreDNS(t, harness.CoreDNSOptions{Corefile: coreRun.Text, Addr: coreRun.Addrs["dns"], Probe: "www.open.test."})
	const dropped = "no answer"
	cases := []struct {
		from, name string
		qtype      uint16
		want       string
	}{
		{"127.0.0.1", "www.open.test.", dns.TypeA, "NOERROR [www.open.test.\t3600\tIN\tA\t192.0.2.4] [] ede=none"},
		{"127.0.0.3", "www.open.test.", dns.TypeA, "REFUSED [] [] ede=15"},
		{"127.0.0.1", "www.blocked.test.", dns.TypeA, "REFUSED [] [] ede=15"},
		{"127.0.0.1", "www.blocked.test.", dns.TypeAAAA, "NOERROR [] [] ede=none"},
		{"127.0.0.2", "www.filtered.test.", dns.TypeA, "NOERROR [] [] ede=17"},
		{"127.0.0.4", "www.open.test.", dns.TypeA, dropped},
		{"127.0.0.4", "www.blocked.test.", dns.TypeA, "REFUSED [] [] ede=15"},
	}
	for _, c := range cases {
		for _, server := range []struct{ name, addr string }{{"shardns", shardns}, {"coredns", coredns}} {
			for _, proto := range []string{"udp", "tcp"} {
				got, err := askFrom(server.addr, proto, c.from, c.name, c.qtype)
				if errors.Is(err, errNoAnswer) {
					got = dropped
				} else if err != nil {
					t.Fatal(err)
				}
				if got != c.want {
					t.Errorf("%s over %s, %s %s from %s:\n got %s\nwant %s", server.name, proto, c.name,
						dns.TypeToString[c.qtype], c.from, got, c.want)
				}
			}
		}
	}
}

var errNoAnswer = errors.New("no answer")

// askFrom asks name from the source address from (a loopback address
// other than 127.0.0.1 is another client) with EDNS, and returns the
// rcode, the answer and authority sections and the extended error.
func askFrom(addr, proto, from, name string, qtype uint16) (string, error) {
	var local net.Addr = &net.UDPAddr{IP: net.ParseIP(from)}
	if proto == "tcp" {
		local = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c := &dns.Client{Net: proto, Timeout: time.Second, Dialer: &net.Dialer{LocalAddr: local, Timeout: time.Second}}
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.SetEdns0(1232, false)
	r, _, err := c.Exchange(m, addr)
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		return "", errNoAnswer
	}
	if err != nil {
		return "", err
	}
	code := "none"
	if opt := r.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_EDE); ok {
				code = fmt.Sprint(e.InfoCode)
			}
		}
	}
	return fmt.Sprintf("%s [%s] [%s] ede=%s", dns.RcodeToString[r.Rcode], strings.Join(testutil.Records(r.Answer), " "),
		strings.Join(testutil.Records(r.Ns), " "), code), nil
}
