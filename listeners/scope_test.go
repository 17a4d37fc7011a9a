package listeners

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/internal/testutil"
)

func TestScopeMatch(t *testing.T) {
	blocks := NewScope([]Block{
		{Zones: []string{"Example.ORG"}},
		{Zones: []string{"who.example.org."}, Whoami: true},
		{Zones: []string{"net"}},
	}, "")
	withRoot := NewScope([]Block{{Zones: []string{"."}}, {Zones: []string{"a.org"}, Whoami: true}}, "")
	cases := []struct {
		scope        *Scope
		name, zone   string
		whoami, isIn bool
	}{
		{blocks, "www.example.org.", "example.org.", false, true},
		{blocks, "WWW.Example.Org.", "example.org.", false, true},
		{blocks, "example.org.", "example.org.", false, true},
		{blocks, "x.who.example.org.", "who.example.org.", true, true},
		{blocks, "WHO.example.org.", "who.example.org.", true, true},
		{blocks, "a.net.", "net.", false, true},
		{blocks, "notexample.org.", "", false, false},
		{blocks, "org.", "", false, false},
		{blocks, ".", "", false, false},
		{blocks, `www\.example.org.`, "", false, false}, // one label "www.example" under org.
		{withRoot, "b.org.", ".", false, true},
		{withRoot, "x.a.org.", "a.org.", true, true},
		{NewScope([]Block{{}}, ""), "anything.", ".", false, true},
	}
	for _, c := range cases {
		zone, whoami, ok := c.scope.Match(c.name)
		if zone != c.zone || whoami != c.whoami || ok != c.isIn {
			t.Errorf("Match(%q) = %q, %v, %v; want %q, %v, %v", c.name, zone, whoami, ok, c.zone, c.whoami, c.isIn)
		}
	}
}

// startScoped serves the test zone through a listener limited by blocks.
func startScoped(t *testing.T, blocks ...Block) string {
	var scope atomic.Pointer[Scope]
	scope.Store(NewScope(blocks, ""))
	return startListenerWith(t, Config{MaxConnections: 16, IdleTimeout: time.Second, Scope: &scope})
}

// A listener limited to a zone answers it and refuses other names, over
// both transports, with the EDNS0 record kept.
func TestScopeRefusesOtherZones(t *testing.T) {
	addr := startScoped(t, Block{Zones: []string{"cluster.local"}})
	for _, proto := range []string{"udp", "tcp"} {
		expectWeb(t, addr, proto)
		m := new(dns.Msg)
		m.SetQuestion("www.example.com.", dns.TypeA)
		m.SetEdns0(1232, false)
		r, err := testutil.ExchangeMsg(addr, proto, m)
		if err != nil {
			t.Fatal(err)
		}
		if r.Rcode != dns.RcodeRefused || len(r.Answer) != 0 || r.IsEdns0() == nil || r.Id != m.Id {
			t.Fatalf("%s: want REFUSED with OPT, got %v", proto, r)
		}
	}
}

// whoami answers as CoreDNS's plugin: nothing in the answer section, the
// client's address and an SRV record with its port and transport in the
// additional section, owners spelled as asked.
func TestWhoami(t *testing.T) {
	addr := startScoped(t, Block{Zones: []string{"cluster.local"}}, Block{Zones: []string{"Who.Example"}, Whoami: true})
	for _, proto := range []string{"udp", "tcp"} {
		conn, err := dns.Dial(proto, addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		m := new(dns.Msg)
		m.SetQuestion("Me.WHO.example.", dns.TypeTXT)
		if err := conn.WriteMsg(m); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		r, err := conn.ReadMsg()
		if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(conn.LocalAddr().String())
		want := []string{
			"Me.WHO.example.\t0\tIN\tA\t127.0.0.1",
			"_" + proto + ".Me.WHO.example.\t0\tIN\tSRV\t0 0 " + port + " .",
		}
		got := testutil.Records(r.Extra)
		if r.Rcode != dns.RcodeSuccess || !r.Authoritative || len(r.Answer) != 0 || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Fatalf("%s: got %v, want extra %q", proto, r, want)
		}
	}
	expectWeb(t, addr, "udp") // the other block still answers records
}
