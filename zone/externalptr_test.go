package zone

import (
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/model"
)

// externalPTRConfig is `k8s_external example.org 2.0.192.in-addr.arpa`
// beside a kubernetes plugin serving reverse (the reverse zones listed,
// none: not at all) and falling through in fall.
func externalPTRConfig(reverse, fall []string) *Config {
	cfg := externalConfig(false)
	cfg.Domains.Reverse = reverse
	cfg.Domains.External = []string{"example.org.", "2.0.192.in-addr.arpa.", "8.b.d.0.1.0.0.2.ip6.arpa."}
	cfg.External.Zones = cfg.Domains.External
	cfg.Fallthrough = fall
	cfg.Prepare()
	return cfg
}

// ptrCluster adds to externalCluster a Service whose external IP is also
// a cluster IP, one sharing an external IP with lb, and one in a
// namespace that is not exposed.
func ptrCluster() []any {
	return append(externalCluster(),
		&model.Service{Namespace: "ns2", Name: "both", ClusterIPs: ips("192.0.2.50"), ExternalIPs: ips("192.0.2.50")},
		&model.Service{Namespace: "ns2", Name: "shared", ClusterIPs: ips("10.0.0.11"), ExternalIPs: ips("192.0.2.1")},
		&model.Service{Namespace: "gone", Name: "old", ClusterIPs: ips("10.0.0.12"), ExternalIPs: ips("192.0.2.77")},
	)
}

const rz = "2.0.192.in-addr.arpa."

// k8s_external answers the PTRs of external IPs in its reverse zone as
// CoreDNS does, after the kubernetes plugin: its records (TTL the
// plugin's) name every Service with the address in the first external
// zone; a miss is NXDOMAIN with the external zone's SOA; a cluster IP the
// kubernetes plugin serves stays its own answer.
func TestAnswerExternalPTR(t *testing.T) {
	external := []tc{
		{qname: "1." + rz, qtype: dns.TypePTR, answer: []string{
			"1." + rz + " 5 IN PTR lb.ns1.example.org.", "1." + rz + " 5 IN PTR shared.ns2.example.org."}},
		// A Service without ports has its PTR, though no address record.
		{qname: "9." + rz, qtype: dns.TypePTR, answer: []string{"9." + rz + " 5 IN PTR noports.ns1.example.org."}},
		{qname: "2." + rz, qtype: dns.TypePTR, answer: []string{"2." + rz + " 5 IN PTR hdlsext.ns2.example.org."}},
		{qname: "3." + rz, qtype: dns.TypePTR, rcode: NX, soa: rz},
		{qname: "77." + rz, qtype: dns.TypePTR, rcode: NX, soa: rz}, // its namespace is not exposed
		// Other types, and names that are not an address's: names of the
		// zone as any other (a label that is no namespace).
		{qname: "1." + rz, qtype: A, rcode: NX, soa: rz},
		{qname: "x." + rz, qtype: dns.TypePTR, rcode: NX, soa: rz},
		{qname: "ns1." + rz, qtype: A, soa: rz}, // a namespace's name: NODATA
		{qname: rz, qtype: SOA, answer: []string{
			rz + " 5 IN SOA ns1.dns." + rz + " hostmaster.dns." + rz + " 1 7200 1800 86400 5"}},
		// The address outside the external zone is nobody's.
		{qname: "1.3.0.192.in-addr.arpa.", qtype: dns.TypePTR, rcode: NX, soa: "in-addr.arpa."},
		// The apex of an external zone above a /64 key: where the
		// kubernetes plugin has no zone key, its miss falls through too.
		{qname: "8.b.d.0.1.0.0.2.ip6.arpa.", qtype: dns.TypePTR, soa: "8.b.d.0.1.0.0.2.ip6.arpa."},
		{qname: "lb.ns1.example.org.", qtype: A, answer: []string{
			"lb.ns1.example.org. 5 IN A 192.0.2.1", "lb.ns1.example.org. 5 IN A 198.51.100.7"}},
	}
	fallthroughs := []tc{
		{qname: "50." + rz, qtype: dns.TypePTR, answer: []string{"50." + rz + " 5 IN PTR both.ns2.svc.cluster.local."}},
		{qname: "50." + rz, qtype: A, soa: "in-addr.arpa."},
		{qname: "1.0.0.10.in-addr.arpa.", qtype: dns.TypePTR, answer: []string{"1.0.0.10.in-addr.arpa. 5 IN PTR svc1.ns1.svc.cluster.local."}},
		{qname: "99.0.0.10.in-addr.arpa.", qtype: dns.TypePTR, rcode: NX, soa: "in-addr.arpa."},
	}
	t.Run("the kubernetes plugin falls through", func(t *testing.T) {
		cfg := externalPTRConfig([]string{"in-addr.arpa.", "ip6.arpa."}, []string{"in-addr.arpa.", "ip6.arpa."})
		external[9].soa = "in-addr.arpa." // the kubernetes plugin's miss, outside the external zone
		runCases(t, buildView(t, cfg, true, ptrCluster()), cfg, append(external, fallthroughs...))
	})
	t.Run("the kubernetes plugin serves no reverse zone", func(t *testing.T) {
		cfg := externalPTRConfig(nil, nil)
		cases := append([]tc{}, external...)
		cases[9] = tc{qname: "1.3.0.192.in-addr.arpa.", qtype: dns.TypePTR} // not ours: forwarded
		runCases(t, buildView(t, cfg, true, ptrCluster()), cfg, append(cases,
			tc{qname: "50." + rz, qtype: dns.TypePTR, answer: []string{"50." + rz + " 5 IN PTR both.ns2.example.org."}}))
	})
	t.Run("the kubernetes plugin does not fall through", func(t *testing.T) {
		cfg := externalPTRConfig([]string{"in-addr.arpa.", "ip6.arpa."}, nil)
		runCases(t, buildView(t, cfg, true, ptrCluster()), cfg, append([]tc{
			{qname: "1." + rz, qtype: dns.TypePTR, rcode: NX, soa: "in-addr.arpa."},
			{qname: "9." + rz, qtype: dns.TypePTR, rcode: NX, soa: "in-addr.arpa."},
		}, fallthroughs...))
	})
}

// An external reverse zone's key is a reverse zone's, its apex included,
// so its PTRs are placed, held and asked for as a cluster IP's are.
func TestRouteExternalReverse(t *testing.T) {
	cfg := externalPTRConfig(nil, nil)
	for _, name := range []string{rz, "7." + rz} {
		if r := cfg.Domains.Route(name); r.Kind != RouteZone || !r.Reverse || !r.External || r.Key != rz || r.Origin != rz {
			t.Errorf("Route(%s) = %+v, want the reverse zone %s of the external zone", name, r, rz)
		}
	}
	if r := cfg.Domains.Route("ns1.example.org."); r.Reverse {
		t.Errorf("Route(ns1.example.org.) = %+v, a forward name", r)
	}
	if got := PTRs(cfg, ptrCluster()[len(ptrCluster())-3])[rz]; len(got) == 0 || !got[0].External || got[0].Target != "both.ns2.example.org." {
		t.Errorf("the PTRs of both.ns2 are %+v, want its external PTR first", got)
	}
}

// k8s_external's PTRs keep their mark through a packed list.
func TestPackedExternalPTRs(t *testing.T) {
	ptrs := []PTR{{Addr: ips("192.0.2.1")[0], Target: "lb.ns1.example.org.", External: true},
		{Addr: ips("192.0.2.1")[0], Target: "lb.ns1.svc.cluster.local."}}
	got := PackPTRs(ptrs).PTRs()
	if len(got) != 2 || !got[0].External || got[1].External {
		t.Fatalf("packed and read back: %+v, want %+v", got, ptrs)
	}
}
