package expression

import (
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

func TestConditions(t *testing.T) {
	v4 := Request{Name: "abc.x.example.com.", Type: dns.TypeA, Class: dns.ClassINET, ID: 7, Opcode: 0,
		UDPSize: 1232, Do: true, Size: 40,
		Client: netip.MustParseAddrPort("127.0.0.2:5300"), Server: netip.MustParseAddrPort("127.0.0.1:53")}
	v6 := v4
	v6.Client, v6.TCP, v6.Type = netip.MustParseAddrPort("[2001:db8::5]:4000"), true, dns.TypeMX
	mapped := v4
	mapped.Client = netip.MustParseAddrPort("[::ffff:192.168.1.1]:53")
	cases := []struct {
		expr string
		req  Request
		want bool
	}{
		{"incidr(client_ip(), '127.0.0.0/24')", v4, true},
		{"incidr(client_ip(), '192.168.0.0/16')", v4, false},
		{"incidr(client_ip(), '192.168.0.0/16')", mapped, true},
		{"incidr(client_ip(), '2001:0DB8::/32')", v6, true},
		{"client_ip() == '2001:db8::5'", v6, true},
		{"incidr(client_ip(), 'not a cidr')", v4, false}, // fails at run time: false
		{"type() in ['A', 'AAAA']", v4, true},
		{"type() in ['A', 'AAAA']", v6, false},
		{`name() matches '^abc\\..*\\.example\\.com\\.$'`, v4, true},
		{"class() == 'IN' && proto() == 'udp' && port() == '5300'", v4, true},
		{"proto() == 'tcp' && bufsize() == 65535", v6, true},
		{"bufsize() == 1232 && do() && id() == 7 && opcode() == 0 && size() == 40", v4, true},
		{"server_ip() == '127.0.0.1' && server_port() == '53'", v4, true},
		{"metadata('kubernetes/client-namespace') == ''", v4, true},
	}
	for _, c := range cases {
		cond, err := Compile(c.expr)
		if err != nil {
			t.Fatalf("%s: %v", c.expr, err)
		}
		if got := All([]*Condition{cond}, &c.req); got != c.want {
			t.Errorf("%s for %s: %v, want %v", c.expr, c.req.Client, got, c.want)
		}
	}
}

func TestAllNeedsEvery(t *testing.T) {
	a, _ := Compile("type() == 'A'")
	b, _ := Compile("proto() == 'tcp'")
	r := Request{Type: dns.TypeA}
	if All([]*Condition{a, b}, &r) {
		t.Error("both held over UDP")
	}
	if !All(nil, &r) {
		t.Error("no condition did not hold")
	}
}

func TestCompileErrors(t *testing.T) {
	for _, src := range []string{"name(", "name()", "nosuch()", "type() == 1", ""} {
		if _, err := Compile(src); err == nil {
			t.Errorf("%q compiled", src)
		}
	}
}

func BenchmarkAll(b *testing.B) {
	cond, _ := Compile("incidr(client_ip(), '127.0.0.0/24')")
	r := Request{Name: "x.", Type: dns.TypeA, Client: netip.MustParseAddrPort("127.0.0.2:5300")}
	conds := []*Condition{cond}
	b.ReportAllocs()
	for b.Loop() {
		All(conds, &r)
	}
}
