package query

import (
	"io"
	"log/slog"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// The fast path must give, byte for byte once unpacked, what the full
// path gives.
func TestFastPathMatchesFullPath(t *testing.T) {
	fast := testHandler(t)
	full := testHandler(t)
	full.QueryLog = slog.New(slog.NewTextHandler(io.Discard, nil)) // query logging takes the full path
	cases := []struct {
		name  string
		qtype uint16
		edns  uint16
		tcp   bool
	}{
		{"web.ns.svc.cluster.local.", dns.TypeA, 0, false},
		{"WEB.Ns.svc.cluster.local.", dns.TypeA, 1232, false},
		{"web.ns.svc.cluster.local.", dns.TypeAAAA, 0, false},
		{"_http._tcp.web.ns.svc.cluster.local.", dns.TypeSRV, 4096, false},
		{"big.ns.svc.cluster.local.", dns.TypeA, 0, false},
		{"big.ns.svc.cluster.local.", dns.TypeA, 1232, false},
		{"big.ns.svc.cluster.local.", dns.TypeA, 0, true},
		{"missing.ns.svc.cluster.local.", dns.TypeA, 0, false},
		{"cluster.local.", dns.TypeSOA, 0, false},
		{"dns-version.cluster.local.", dns.TypeTXT, 512, false},
		{"10-0-0-9.ns.pod.cluster.local.", dns.TypeA, 0, false},
		{"1.0.0.10.in-addr.arpa.", dns.TypePTR, 0, false},
	}
	for _, c := range cases {
		for round := range 2 { // build, then reuse
			m := query(c.name, c.qtype)
			m.Id = uint16(1000 + round)
			m.RecursionDesired = round == 0
			if c.edns > 0 {
				m.SetEdns0(c.edns, false)
			}
			req := pack(t, m)
			tr := Transport{TCP: c.tcp}
			got, want := serve(t, fast, req, tr), serve(t, full, req, tr)
			if got.String() != want.String() {
				t.Fatalf("%s %s (round %d):\nfast:\n%v\nfull:\n%v", c.name, dns.TypeToString[c.qtype], round, got, want)
			}
		}
	}
}

// A published snapshot replaces the packed answers built from the old one.
func TestFastPathFollowsUpdates(t *testing.T) {
	cfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}}, TTL: 5}
	cfg.Prepare()
	table := zone.NewTable(zone.NewDirectory(cfg, map[string]struct{}{"ns": {}}, true, 1))
	key := zone.ServiceZoneKey("ns", "cluster.local.")
	slot := table.NewSlot(key)
	publish := func(ip string) {
		svc := &model.Service{Namespace: "ns", Name: "web", ClusterIPs: []netip.Addr{netip.MustParseAddr(ip)},
			Ports: []model.Port{{Name: "http", Protocol: "TCP", Port: 80}}}
		slot.Store(zone.BuildServiceZone(cfg, key, "cluster.local.", 1, map[string]*model.Service{"web": svc}, nil))
	}
	h := &Handler{Config: cfg, Zones: table}
	ask := func() string {
		r := serve(t, h, pack(t, query("web.ns.svc.cluster.local.", dns.TypeA)), Transport{})
		if len(r.Answer) != 1 {
			t.Fatalf("answer %v", r.Answer)
		}
		return r.Answer[0].(*dns.A).A.String()
	}
	publish("10.0.0.1")
	if ip := ask(); ip != "10.0.0.1" {
		t.Fatalf("got %s", ip)
	}
	publish("10.0.0.2")
	if ip := ask(); ip != "10.0.0.2" {
		t.Fatalf("after an update: got %s, want 10.0.0.2", ip)
	}
}

// A request whose OPT options do not parse is answered FORMERR, as the
// full path answers any request that does not unpack; one with a cookie is
// answered.
func TestFastPathChecksEDNSOptions(t *testing.T) {
	h := testHandler(t)
	m := query("web.ns.svc.cluster.local.", dns.TypeA)
	m.SetEdns0(1232, false)
	opt := m.IsEdns0()
	opt.Option = append(opt.Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"})
	good := pack(t, m)
	if r := serve(t, h, good, Transport{}); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("request with a cookie: rcode %s, %d answers, want NOERROR with one A:\n%v", dns.RcodeToString[r.Rcode], len(r.Answer), r)
	}
	// The option claims one byte more than the OPT record holds.
	short := append([]byte(nil), good...)
	short[len(short)-10+1]++ // the cookie's option length: code (2), length (2), 8 bytes of cookie
	// An ECS option of an unknown address family.
	subnet := append([]byte(nil), good[:len(good)-12]...)
	subnet = append(subnet, 0, 8, 0, 8, 0, 9, 24, 0, 10, 0, 0, 0)
	for name, req := range map[string][]byte{"option overruns the record": short, "ECS of family 9": subnet} {
		if new(dns.Msg).Unpack(req) == nil {
			t.Fatalf("%s: the test request unpacks", name)
		}
		r := serve(t, h, req, Transport{})
		if r.Rcode != dns.RcodeFormatError || len(r.Answer) != 0 {
			t.Fatalf("%s: rcode %s, %d answers, want FORMERR", name, dns.RcodeToString[r.Rcode], len(r.Answer))
		}
	}
}
