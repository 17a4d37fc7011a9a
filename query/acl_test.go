package query

import (
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/acl"
	"github.com/shardns/shardns/config"
)

// Blocked questions get REFUSED, filtered ones an empty NOERROR, each
// with its extended error for EDNS clients; dropped ones no answer; the
// fast path answers allowed clients only.
func TestACL(t *testing.T) {
	h := testHandler(t)
	h.ACL = acl.Compile([]config.ACLConfig{{Policies: []config.ACLPolicy{
		{Action: "allow", Nets: []string{"10.0.0.0/24"}},
		{Action: "filter", Types: []string{"AAAA"}, Nets: []string{"10.0.0.0/8"}},
		{Action: "drop", Nets: []string{"10.9.9.9"}},
		{Action: "block", Nets: []string{"10.0.0.0/8"}},
	}}})
	from := func(ip string) Transport { return Transport{Client: netip.AddrPortFrom(netip.MustParseAddr(ip), 5353)} }
	edns := func(name string, qtype uint16) []byte {
		m := query(name, qtype)
		m.SetEdns0(1232, false)
		return pack(t, m)
	}
	name := "web.ns.svc.cluster.local."
	for i := 0; i < 2; i++ { // the second time, from the fast path's packed answers
		if r := serve(t, h, edns(name, dns.TypeA), from("10.0.0.7")); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("allowed client: %v", r)
		}
		r := serve(t, h, edns(name, dns.TypeA), from("10.1.0.7"))
		if r.Rcode != dns.RcodeRefused || len(r.Answer) != 0 || r.Authoritative {
			t.Fatalf("blocked client: %v", r)
		}
		if code := ede(r); code != dns.ExtendedErrorCodeBlocked {
			t.Errorf("blocked: extended error %d, want %d", code, dns.ExtendedErrorCodeBlocked)
		}
		r = serve(t, h, edns(name, dns.TypeAAAA), from("10.1.0.7"))
		if r.Rcode != dns.RcodeSuccess || len(r.Answer)+len(r.Ns) != 0 || ede(r) != dns.ExtendedErrorCodeFiltered {
			t.Fatalf("filtered: %v", r)
		}
		if out := h.Serve(edns(name, dns.TypeA), from("10.9.9.9"), nil); out != nil {
			t.Fatal("dropped client got an answer")
		}
	}
	// Without EDNS, no OPT record carries the reason (RFC 6891).
	if r := serve(t, h, pack(t, query(name, dns.TypeA)), from("10.1.0.7")); r.Rcode != dns.RcodeRefused || r.IsEdns0() != nil {
		t.Errorf("blocked client without EDNS: %v", r)
	}
}

// ede returns the extended DNS error code of r, or 0xffff.
func ede(r *dns.Msg) uint16 {
	if opt := r.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_EDE); ok {
				return e.InfoCode
			}
		}
	}
	return 0xffff
}
