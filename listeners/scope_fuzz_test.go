package listeners

import (
	"io"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/metrics"
	"github.com/shardns/shardns/query"
	"github.com/shardns/shardns/zone"
)

func fuzzQuery(f *testing.F, name string, qtype uint16, edns bool) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	if edns {
		m.SetEdns0(1232, true)
	}
	b, err := m.Pack()
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// FuzzScope sends any bytes through a scope with a plain and a whoami
// zone: what the scope answers itself must be a well-formed reply to the
// request, REFUSED outside the zones and whoami inside the whoami zone.
func FuzzScope(f *testing.F) {
	for _, name := range []string{"web.ns.svc.cluster.local.", "WHO.example.", "x.who.example.", "example.com.", ".", `a\.who.example.`} {
		for _, edns := range []bool{false, true} {
			q := fuzzQuery(f, name, dns.TypeA, edns)
			f.Add(q, false)
			f.Add(q[:len(q)-3], true)
		}
	}
	zcfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}}, TTL: 5}
	zcfg.Prepare()
	h := &query.Handler{Config: zcfg, Zones: zone.NewStatic(zcfg, nil, true), Server: "dns://127.0.0.1:53"}
	_, h.Metrics = metrics.New("fuzz")
	h.QueryLog = slog.New(slog.NewTextHandler(io.Discard, nil))
	scope := NewScope([]Block{{Zones: []string{"cluster.local"}}, {Zones: []string{"who.example"}, Whoami: true}}, "")
	client := netip.MustParseAddrPort("[2001:db8::7]:5300")
	f.Fuzz(func(t *testing.T, req []byte, tcp bool) {
		_, out, done := scope.route(h, req, query.Transport{TCP: tcp, Client: client}, nil)
		if !done {
			return
		}
		q, r := new(dns.Msg), new(dns.Msg)
		if err := q.Unpack(req); err != nil {
			t.Fatalf("answered a request that does not unpack: %v", err)
		}
		if err := r.Unpack(out); err != nil {
			t.Fatalf("the reply does not unpack: %v", err)
		}
		if !r.Response || r.Id != q.Id || len(r.Question) != 1 || r.Question[0] != q.Question[0] {
			t.Fatalf("not a reply to %v: %v", q, r)
		}
		_, whoami, in := scope.Match(q.Question[0].Name)
		switch {
		case !in && r.Rcode != dns.RcodeRefused:
			t.Fatalf("outside the zones: %v", r)
		case in && !whoami:
			t.Fatalf("answered a name the handler should: %v", r)
		case in && (r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 || len(r.Extra) == 0 || r.Extra[0].(*dns.AAAA).AAAA.String() != "2001:db8::7"):
			t.Fatalf("whoami: %v", r)
		}
		if (q.IsEdns0() == nil) != (r.IsEdns0() == nil) {
			t.Fatalf("EDNS0 not echoed: %v", r)
		}
	})
}

// FuzzMatchQuestion checks that routing a question from the wire picks
// the block that reading its name as miekg/dns does, escapes and all,
// and matching that picks, for any bytes.
func FuzzMatchQuestion(f *testing.F) {
	for _, name := range []string{"web.ns.svc.cluster.local.", "Web.NS.svc.Cluster.Local.", "1.0.0.10.IN-ADDR.arpa.",
		"www.example.org.", "cluster.local.", "local.", ".", `a\.b.cluster.local.`, `a\065.cluster.local.`, "_dns._udp.x.ip6.arpa."} {
		f.Add(fuzzQuery(f, name, dns.TypeA, true))
	}
	scopes := []*Scope{
		NewScope([]Block{{Zones: []string{"cluster.local"}}, {Zones: []string{"in-addr.arpa"}},
			{Zones: []string{"ip6.arpa"}}, {Zones: []string{"."}}}, ""),
		NewScope([]Block{{Zones: []string{"Cluster.Local", "b.cluster.local"}}, {Zones: []string{"who.example"}, Whoami: true}}, ""),
	}
	f.Fuzz(func(t *testing.T, req []byte) {
		name, read := questionName(req)
		for _, s := range scopes {
			zone, b, ok, wireRead := s.matchQuestion(req)
			if wireRead != read {
				t.Fatalf("read %v, want %v", wireRead, read)
			}
			if !read {
				continue
			}
			wantZone, wantBlock, wantOK := s.match(name)
			if zone != wantZone || b != wantBlock || ok != wantOK {
				t.Fatalf("%q: got %q %v %v, want %q %v %v", name, zone, b, ok, wantZone, wantBlock, wantOK)
			}
		}
	})
}
