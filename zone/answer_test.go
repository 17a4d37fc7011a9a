package zone

import (
	"net/netip"
	"sort"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/model"
)

func ips(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

func testConfig() *Config {
	cfg := &Config{
		Domains: Domains{Cluster: []string{"cluster.local."}, Reverse: []string{"in-addr.arpa.", "ip6.arpa."}},
		TTL:     5,
		Pods:    PodsInsecure,
		NSAddrs: ips("10.96.0.10"),
	}
	cfg.Prepare()
	return cfg
}

// testCluster is a small cluster covering every answer kind.
func testCluster() []any {
	http := model.Port{Name: "http", Protocol: "TCP", Port: 80}
	return []any{
		&model.Namespace{Name: "default"},
		&model.Namespace{Name: "ns1"},
		&model.Namespace{Name: "ns2"},
		&model.Service{Namespace: "ns1", Name: "svc1", ClusterIPs: ips("10.0.0.1"),
			Ports: []model.Port{http, {Name: "dns", Protocol: "UDP", Port: 53}}},
		&model.Service{Namespace: "ns1", Name: "dual", ClusterIPs: ips("10.0.0.2", "fd00::2"), Ports: []model.Port{http}},
		&model.Service{Namespace: "ns1", Name: "v6only", ClusterIPs: ips("fd00::3"), Ports: []model.Port{http}},
		&model.Service{Namespace: "ns1", Name: "hdls", Type: model.ServiceHeadless, Ports: []model.Port{http}},
		&model.EndpointSlice{Namespace: "ns1", Name: "hdls-abc", ServiceName: "hdls", Ports: []model.Port{http},
			Endpoints: []model.Endpoint{
				{Addresses: ips("172.16.0.1"), Hostname: "web-0", Ready: true},
				{Addresses: ips("172.16.0.2"), TargetPodName: "web-x", Ready: true},
				{Addresses: ips("172.16.0.3"), Hostname: "web-3", Ready: false},
			}},
		&model.EndpointSlice{Namespace: "ns1", Name: "hdls-v6", ServiceName: "hdls", Ports: []model.Port{http},
			Endpoints: []model.Endpoint{{Addresses: ips("fd00:1::1"), Ready: true}}},
		&model.EndpointSlice{Namespace: "ns1", Name: "svc1-abc", ServiceName: "svc1",
			Ports: []model.Port{http}, Endpoints: []model.Endpoint{{Addresses: ips("172.16.1.1"), Hostname: "b1", Ready: true}}},
		&model.Service{Namespace: "ns1", Name: "nobody", Type: model.ServiceHeadless, Ports: []model.Port{http}},
		&model.EndpointSlice{Namespace: "ns1", Name: "nobody-1", ServiceName: "nobody", Ports: []model.Port{http},
			Endpoints: []model.Endpoint{{Addresses: ips("172.16.0.9"), Ready: false}}},
		&model.Service{Namespace: "ns1", Name: "ext", Type: model.ServiceExternalName, ExternalName: "example.com"},
		&model.Service{Namespace: "ns1", Name: "alias", Type: model.ServiceExternalName, ExternalName: "svc1.ns1.svc.cluster.local"},
		&model.Service{Namespace: "ns1", Name: "dangling", Type: model.ServiceExternalName, ExternalName: "gone.ns1.svc.cluster.local"},
		&model.Service{Namespace: "ns2", Name: "svc2", ClusterIPs: ips("10.0.1.1"), Ports: []model.Port{{Protocol: "TCP", Port: 443}}},
	}
}

func buildView(t testing.TB, cfg *Config, synced bool, objs []any) Reader {
	t.Helper()
	return NewStatic(cfg, objs, synced)
}

// tc is one question and the response a client must see. Records are
// zone-file strings; the authority section is given by its SOA owner.
type tc struct {
	qname  string
	qtype  uint16
	rcode  int
	answer []string
	extra  []string
	soa    string // owner of the SOA in the authority section, "" for none
}

func rrStrings(t *testing.T, rrs []dns.RR) []string {
	out := make([]string, len(rrs))
	for i, rr := range rrs {
		out[i] = rr.String()
	}
	sort.Strings(out)
	return out
}

func parsed(t *testing.T, recs []string) []string {
	t.Helper()
	rrs := make([]dns.RR, len(recs))
	for i, s := range recs {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatalf("bad test record %q: %v", s, err)
		}
		rrs[i] = rr
	}
	return rrStrings(t, rrs)
}

func runCases(t *testing.T, v Reader, cfg *Config, cases []tc) {
	t.Helper()
	for _, c := range cases {
		name := c.qname + "/" + dns.TypeToString[c.qtype]
		t.Run(name, func(t *testing.T) {
			r := Answer(cfg, v, Question{Name: c.qname, Type: c.qtype})
			if r.Rcode != c.rcode {
				t.Fatalf("rcode = %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[c.rcode])
			}
			if got, want := rrStrings(t, r.Answer), parsed(t, c.answer); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("answer:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			if got, want := rrStrings(t, r.Extra), parsed(t, c.extra); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("extra:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			switch {
			case c.soa == "" && len(r.Ns) != 0:
				t.Errorf("authority = %v, want empty", r.Ns)
			case c.soa != "" && (len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA || r.Ns[0].Header().Name != c.soa):
				t.Errorf("authority = %v, want the SOA of %s", r.Ns, c.soa)
			}
		})
	}
}

const (
	A     = dns.TypeA
	AAAA  = dns.TypeAAAA
	SRV   = dns.TypeSRV
	PTRt  = dns.TypePTR
	TXT   = dns.TypeTXT
	CNAME = dns.TypeCNAME
	SOA   = dns.TypeSOA
	NS    = dns.TypeNS
	MX    = dns.TypeMX
	OK    = dns.RcodeSuccess
	NX    = dns.RcodeNameError
)

const cl = "cluster.local."

func TestAnswerClusterIP(t *testing.T) {
	cfg := testConfig()
	v := buildView(t, cfg, true, testCluster())
	runCases(t, v, cfg, []tc{
		{qname: "svc1.ns1.svc.cluster.local.", qtype: A, answer: []string{"svc1.ns1.svc.cluster.local. 5 IN A 10.0.0.1"}},
		{qname: "svc1.ns1.svc.cluster.local.", qtype: AAAA, soa: cl},
		{qname: "svc1.ns1.svc.cluster.local.", qtype: TXT, soa: cl},
		{qname: "svc1.ns1.svc.cluster.local.", qtype: MX, soa: cl},
		{qname: "dual.ns1.svc.cluster.local.", qtype: A, answer: []string{"dual.ns1.svc.cluster.local. 5 IN A 10.0.0.2"}},
		{qname: "dual.ns1.svc.cluster.local.", qtype: AAAA, answer: []string{"dual.ns1.svc.cluster.local. 5 IN AAAA fd00::2"}},
		{qname: "v6only.ns1.svc.cluster.local.", qtype: AAAA, answer: []string{"v6only.ns1.svc.cluster.local. 5 IN AAAA fd00::3"}},
		{qname: "v6only.ns1.svc.cluster.local.", qtype: A, soa: cl},
		{qname: "svc2.ns2.svc.cluster.local.", qtype: A, answer: []string{"svc2.ns2.svc.cluster.local. 5 IN A 10.0.1.1"}},
		{qname: "missing.ns1.svc.cluster.local.", qtype: A, rcode: NX, soa: cl},
		{qname: "svc1.nons.svc.cluster.local.", qtype: A, rcode: NX, soa: cl},
		{qname: "deeper.than.svc1.ns1.svc.cluster.local.", qtype: A, rcode: NX, soa: cl},
		{qname: "nohost.svc1.ns1.svc.cluster.local.", qtype: A, rcode: NX, soa: cl},
		// Endpoint names answer under ClusterIP services too, as in CoreDNS.
		{qname: "b1.svc1.ns1.svc.cluster.local.", qtype: A, answer: []string{"b1.svc1.ns1.svc.cluster.local. 5 IN A 172.16.1.1"}},
	})
}

func TestAnswerSRV(t *testing.T) {
	cfg := testConfig()
	v := buildView(t, cfg, true, testCluster())
	runCases(t, v, cfg, []tc{
		{qname: "_http._tcp.svc1.ns1.svc.cluster.local.", qtype: SRV,
			answer: []string{"_http._tcp.svc1.ns1.svc.cluster.local. 5 IN SRV 0 100 80 svc1.ns1.svc.cluster.local."},
			extra:  []string{"svc1.ns1.svc.cluster.local. 5 IN A 10.0.0.1"}},
		{qname: "_dns._udp.svc1.ns1.svc.cluster.local.", qtype: SRV,
			answer: []string{"_dns._udp.svc1.ns1.svc.cluster.local. 5 IN SRV 0 100 53 svc1.ns1.svc.cluster.local."},
			extra:  []string{"svc1.ns1.svc.cluster.local. 5 IN A 10.0.0.1"}},
		// The protocol must match the port's.
		{qname: "_http._udp.svc1.ns1.svc.cluster.local.", qtype: SRV, rcode: NX, soa: cl},
		{qname: "_nope._tcp.svc1.ns1.svc.cluster.local.", qtype: SRV, rcode: NX, soa: cl},
		// The bare service name lists every port.
		{qname: "svc1.ns1.svc.cluster.local.", qtype: SRV,
			answer: []string{
				"svc1.ns1.svc.cluster.local. 5 IN SRV 0 50 80 svc1.ns1.svc.cluster.local.",
				"svc1.ns1.svc.cluster.local. 5 IN SRV 0 50 53 svc1.ns1.svc.cluster.local.",
			},
			extra: []string{"svc1.ns1.svc.cluster.local. 5 IN A 10.0.0.1"}},
		{qname: "_http._tcp.dual.ns1.svc.cluster.local.", qtype: SRV,
			answer: []string{"_http._tcp.dual.ns1.svc.cluster.local. 5 IN SRV 0 50 80 dual.ns1.svc.cluster.local."},
			extra:  []string{"dual.ns1.svc.cluster.local. 5 IN A 10.0.0.2", "dual.ns1.svc.cluster.local. 5 IN AAAA fd00::2"}},
		{qname: "_http._tcp.hdls.ns1.svc.cluster.local.", qtype: SRV,
			answer: []string{
				"_http._tcp.hdls.ns1.svc.cluster.local. 5 IN SRV 0 33 80 web-0.hdls.ns1.svc.cluster.local.",
				"_http._tcp.hdls.ns1.svc.cluster.local. 5 IN SRV 0 33 80 172-16-0-2.hdls.ns1.svc.cluster.local.",
				"_http._tcp.hdls.ns1.svc.cluster.local. 5 IN SRV 0 33 80 fd00-1--1.hdls.ns1.svc.cluster.local.",
			},
			extra: []string{
				"web-0.hdls.ns1.svc.cluster.local. 5 IN A 172.16.0.1",
				"172-16-0-2.hdls.ns1.svc.cluster.local. 5 IN A 172.16.0.2",
				"fd00-1--1.hdls.ns1.svc.cluster.local. 5 IN AAAA fd00:1::1",
			}},
		{qname: "ext.ns1.svc.cluster.local.", qtype: SRV, soa: cl},
		{qname: "_http._tcp.ext.ns1.svc.cluster.local.", qtype: SRV, rcode: NX, soa: cl},
		// CoreDNS strips one leading underscore from the port and the
		// protocol: the bare forms answer as the underscored name, under
		// the name asked.
		{qname: "http.tcp.svc1.ns1.svc.cluster.local.", qtype: SRV,
			answer: []string{"http.tcp.svc1.ns1.svc.cluster.local. 5 IN SRV 0 100 80 svc1.ns1.svc.cluster.local."},
			extra:  []string{"svc1.ns1.svc.cluster.local. 5 IN A 10.0.0.1"}},
		{qname: "_dns.udp.svc1.ns1.svc.cluster.local.", qtype: SRV,
			answer: []string{"_dns.udp.svc1.ns1.svc.cluster.local. 5 IN SRV 0 100 53 svc1.ns1.svc.cluster.local."},
			extra:  []string{"svc1.ns1.svc.cluster.local. 5 IN A 10.0.0.1"}},
		{qname: "http._tcp.hdls.ns1.svc.cluster.local.", qtype: A,
			answer: []string{"http._tcp.hdls.ns1.svc.cluster.local. 5 IN A 172.16.0.1",
				"http._tcp.hdls.ns1.svc.cluster.local. 5 IN A 172.16.0.2"}},
		{qname: "http.tcp.dual.ns1.svc.cluster.local.", qtype: AAAA,
			answer: []string{"http.tcp.dual.ns1.svc.cluster.local. 5 IN AAAA fd00::2"}},
		{qname: "http.udp.svc1.ns1.svc.cluster.local.", qtype: SRV, rcode: NX, soa: cl},
		{qname: "http.tcp.ext.ns1.svc.cluster.local.", qtype: SRV, rcode: NX, soa: cl},
		{qname: "__http._tcp.svc1.ns1.svc.cluster.local.", qtype: SRV, rcode: NX, soa: cl},
	})
}

func TestAnswerHeadless(t *testing.T) {
	cfg := testConfig()
	v := buildView(t, cfg, true, testCluster())
	runCases(t, v, cfg, []tc{
		{qname: "hdls.ns1.svc.cluster.local.", qtype: A, answer: []string{
			"hdls.ns1.svc.cluster.local. 5 IN A 172.16.0.1",
			"hdls.ns1.svc.cluster.local. 5 IN A 172.16.0.2",
		}},
		{qname: "hdls.ns1.svc.cluster.local.", qtype: AAAA, answer: []string{"hdls.ns1.svc.cluster.local. 5 IN AAAA fd00:1::1"}},
		{qname: "web-0.hdls.ns1.svc.cluster.local.", qtype: A, answer: []string{"web-0.hdls.ns1.svc.cluster.local. 5 IN A 172.16.0.1"}},
		{qname: "172-16-0-2.hdls.ns1.svc.cluster.local.", qtype: A, answer: []string{"172-16-0-2.hdls.ns1.svc.cluster.local. 5 IN A 172.16.0.2"}},
		{qname: "fd00-1--1.hdls.ns1.svc.cluster.local.", qtype: AAAA, answer: []string{"fd00-1--1.hdls.ns1.svc.cluster.local. 5 IN AAAA fd00:1::1"}},
		{qname: "web-0.hdls.ns1.svc.cluster.local.", qtype: SRV,
			answer: []string{"web-0.hdls.ns1.svc.cluster.local. 5 IN SRV 0 100 80 web-0.hdls.ns1.svc.cluster.local."},
			extra:  []string{"web-0.hdls.ns1.svc.cluster.local. 5 IN A 172.16.0.1"}},
		// Not-ready endpoints are not served.
		{qname: "web-3.hdls.ns1.svc.cluster.local.", qtype: A, rcode: NX, soa: cl},
		{qname: "nobody.ns1.svc.cluster.local.", qtype: A, rcode: NX, soa: cl},
		{qname: "web-0.hdls.ns1.svc.cluster.local.", qtype: AAAA, soa: cl},
	})
}

func TestAnswerEndpointPodNames(t *testing.T) {
	cfg := testConfig()
	cfg.EndpointPodNames = true
	v := buildView(t, cfg, true, testCluster())
	runCases(t, v, cfg, []tc{
		{qname: "web-x.hdls.ns1.svc.cluster.local.", qtype: A, answer: []string{"web-x.hdls.ns1.svc.cluster.local. 5 IN A 172.16.0.2"}},
		{qname: "172-16-0-2.hdls.ns1.svc.cluster.local.", qtype: A, rcode: NX, soa: cl},
		{qname: "2.0.16.172.in-addr.arpa.", qtype: PTRt, answer: []string{"2.0.16.172.in-addr.arpa. 5 IN PTR web-x.hdls.ns1.svc.cluster.local."}},
	})
}

func TestAnswerExternalName(t *testing.T) {
	cfg := testConfig()
	v := buildView(t, cfg, true, testCluster())
	runCases(t, v, cfg, []tc{
		{qname: "ext.ns1.svc.cluster.local.", qtype: A, answer: []string{"ext.ns1.svc.cluster.local. 5 IN CNAME example.com."}},
		{qname: "ext.ns1.svc.cluster.local.", qtype: CNAME, answer: []string{"ext.ns1.svc.cluster.local. 5 IN CNAME example.com."}},
		{qname: "alias.ns1.svc.cluster.local.", qtype: A, answer: []string{
			"alias.ns1.svc.cluster.local. 5 IN CNAME svc1.ns1.svc.cluster.local.",
			"svc1.ns1.svc.cluster.local. 5 IN A 10.0.0.1",
		}},
		// In-cluster target with no address of that family: NODATA.
		{qname: "alias.ns1.svc.cluster.local.", qtype: AAAA, soa: cl},
		{qname: "dangling.ns1.svc.cluster.local.", qtype: A, soa: cl},
		{qname: "svc1.ns1.svc.cluster.local.", qtype: CNAME, soa: cl},
	})
}

func TestAnswerPTR(t *testing.T) {
	cfg := testConfig()
	v := buildView(t, cfg, true, testCluster())
	runCases(t, v, cfg, []tc{
		{qname: "1.0.0.10.in-addr.arpa.", qtype: PTRt, answer: []string{"1.0.0.10.in-addr.arpa. 5 IN PTR svc1.ns1.svc.cluster.local."}},
		{qname: "2.0.0.10.in-addr.arpa.", qtype: PTRt, answer: []string{"2.0.0.10.in-addr.arpa. 5 IN PTR dual.ns1.svc.cluster.local."}},
		{qname: "2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", qtype: PTRt,
			answer: []string{"2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa. 5 IN PTR dual.ns1.svc.cluster.local."}},
		{qname: "1.0.16.172.in-addr.arpa.", qtype: PTRt, answer: []string{"1.0.16.172.in-addr.arpa. 5 IN PTR web-0.hdls.ns1.svc.cluster.local."}},
		{qname: "2.0.16.172.in-addr.arpa.", qtype: PTRt, answer: []string{"2.0.16.172.in-addr.arpa. 5 IN PTR 172-16-0-2.hdls.ns1.svc.cluster.local."}},
		{qname: "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.0.0.0.0.d.f.ip6.arpa.", qtype: PTRt,
			answer: []string{"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.1.0.0.0.0.0.d.f.ip6.arpa. 5 IN PTR fd00-1--1.hdls.ns1.svc.cluster.local."}},
		// Not ready: no PTR.
		{qname: "3.0.16.172.in-addr.arpa.", qtype: PTRt, rcode: NX, soa: "in-addr.arpa."},
		{qname: "9.9.9.10.in-addr.arpa.", qtype: PTRt, rcode: NX, soa: "in-addr.arpa."},
		{qname: "0.10.in-addr.arpa.", qtype: PTRt, rcode: NX, soa: "in-addr.arpa."},
		{qname: "in-addr.arpa.", qtype: SOA, answer: []string{"in-addr.arpa. 5 IN SOA ns.dns.in-addr.arpa. hostmaster.in-addr.arpa. 1 7200 1800 86400 5"}},
		{qname: "1.0.0.10.in-addr.arpa.", qtype: A, soa: "in-addr.arpa."},
	})
}

func TestAnswerApexAndSpecialNames(t *testing.T) {
	cfg := testConfig()
	v := buildView(t, cfg, true, testCluster())
	runCases(t, v, cfg, []tc{
		{qname: cl, qtype: SOA, answer: []string{"cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 5"}},
		{qname: cl, qtype: NS, answer: []string{"cluster.local. 5 IN NS ns.dns.cluster.local."},
			extra: []string{"ns.dns.cluster.local. 5 IN A 10.96.0.10"}},
		{qname: cl, qtype: A, soa: cl},
		{qname: "ns.dns.cluster.local.", qtype: A, answer: []string{"ns.dns.cluster.local. 5 IN A 10.96.0.10"}},
		{qname: "dns-version.cluster.local.", qtype: TXT, answer: []string{`dns-version.cluster.local. 28800 IN TXT "1.1.0"`}},
		{qname: "dns-version.cluster.local.", qtype: A, soa: cl},
		{qname: "svc.cluster.local.", qtype: A, soa: cl},
		{qname: "ns1.svc.cluster.local.", qtype: A, soa: cl},
		{qname: "default.svc.cluster.local.", qtype: A, soa: cl}, // namespace without services
		{qname: "nons.svc.cluster.local.", qtype: A, rcode: NX, soa: cl},
		{qname: "foo.cluster.local.", qtype: A, rcode: NX, soa: cl},
		{qname: "svc1.ns1.svc.cluster.local.", qtype: dns.TypeAXFR, rcode: dns.RcodeRefused},
	})
}

func TestAnswerPodsInsecure(t *testing.T) {
	cfg := testConfig()
	v := buildView(t, cfg, true, testCluster())
	runCases(t, v, cfg, []tc{
		{qname: "10-1-2-3.ns1.pod.cluster.local.", qtype: A, answer: []string{"10-1-2-3.ns1.pod.cluster.local. 5 IN A 10.1.2.3"}},
		{qname: "fd00--9.ns1.pod.cluster.local.", qtype: AAAA, answer: []string{"fd00--9.ns1.pod.cluster.local. 5 IN AAAA fd00::9"}},
		{qname: "10-1-2-3.ns1.pod.cluster.local.", qtype: AAAA, soa: cl},
		{qname: "10-1-2-3.nons.pod.cluster.local.", qtype: A, rcode: NX, soa: cl},
		{qname: "10-1-2.ns1.pod.cluster.local.", qtype: A, rcode: NX, soa: cl},
		{qname: "not-an-ip-x.ns1.pod.cluster.local.", qtype: A, rcode: NX, soa: cl},
		{qname: "ns1.pod.cluster.local.", qtype: A, soa: cl},
		{qname: "pod.cluster.local.", qtype: A, soa: cl},
	})
	cfg.Pods = PodsDisabled
	runCases(t, v, cfg, []tc{
		{qname: "10-1-2-3.ns1.pod.cluster.local.", qtype: A, rcode: NX, soa: cl},
	})
}

// namespacesUnknownView is what a node-local cache answers from: no
// zone, no namespace, and the replicas to ask for any key. asked records
// the keys the replicas were looked up for.
type namespacesUnknownView struct {
	dir    *Directory
	remote []string
	asked  []string
}

func newNamespacesUnknownView(cfg *Config, remote []string) *namespacesUnknownView {
	dir := NewDirectory(cfg, map[string]struct{}{}, true, 1)
	dir.AnyNamespace = true
	return &namespacesUnknownView{dir: dir, remote: remote}
}

func (v *namespacesUnknownView) Directory() *Directory { return v.dir }
func (v *namespacesUnknownView) Zone(string) *Snapshot { return nil }
func (v *namespacesUnknownView) Remote(key string) []string {
	v.asked = append(v.asked, key)
	return v.remote
}
func (v *namespacesUnknownView) FanOut(string) []string { return nil }
func (v *namespacesUnknownView) Loading(string) bool    { return false }

// A node that does not know the namespaces cannot answer a pod name
// (pods: insecure): a replica answers NXDOMAIN for a namespace that does
// not exist. It asks the replicas, ordered by the namespace's pod zone,
// with the zone key a replica computes for the name, so the replica's
// dispatch server answers it from its directory.
func TestAnswerPodsNamespacesUnknown(t *testing.T) {
	cfg := testConfig()
	replica := buildView(t, cfg, true, testCluster())
	for _, c := range []struct {
		qname string
		qtype uint16
		key   string // the key the replicas are ordered by
		// what the replica answers when asked
		rcode  int
		answer []string
	}{
		{"10-1-2-3.ns1.pod.cluster.local.", A, "ns1.pod.cluster.local.", OK,
			[]string{"10-1-2-3.ns1.pod.cluster.local. 5 IN A 10.1.2.3"}},
		{"10-1-2-3.nons.pod.cluster.local.", A, "nons.pod.cluster.local.", NX, nil},
		{"fd00--9.ns2.pod.cluster.local.", AAAA, "ns2.pod.cluster.local.", OK,
			[]string{"fd00--9.ns2.pod.cluster.local. 5 IN AAAA fd00::9"}},
		{"10-1-2-3.ns1.pod.cluster.local.", AAAA, "ns1.pod.cluster.local.", OK, nil},
		{"ns1.pod.cluster.local.", A, "ns1.pod.cluster.local.", OK, nil},
		{"nons.pod.cluster.local.", A, "nons.pod.cluster.local.", NX, nil},
		{"not-an-ip.nons.pod.cluster.local.", A, "nons.pod.cluster.local.", NX, nil},
		{"a.10-1-2-3.ns1.pod.cluster.local.", A, "ns1.pod.cluster.local.", NX, nil},
	} {
		name := c.qname + "/" + dns.TypeToString[c.qtype]
		v := newNamespacesUnknownView(cfg, []string{"b", "c"})
		r := Answer(cfg, v, Question{Name: c.qname, Type: c.qtype})
		if strings.Join(r.Remote, ",") != "b,c" || r.Rcode != OK || len(r.Answer) != 0 {
			t.Errorf("%s: %+v, want it asked of b, then c", name, r)
		}
		if strings.Join(v.asked, ",") != c.key {
			t.Errorf("%s: replicas ordered by %q, want %q", name, v.asked, c.key)
		}
		if key := KeyOf(cfg, replica, c.qname); r.Zone != key {
			t.Errorf("%s: sent with zone %q, a replica's key for it is %q", name, r.Zone, key)
		}
		got := Answer(cfg, replica, Question{Name: c.qname, Type: c.qtype})
		if len(got.Remote) != 0 || got.Rcode != c.rcode ||
			strings.Join(rrStrings(t, got.Answer), "\n") != strings.Join(parsed(t, c.answer), "\n") {
			t.Errorf("%s: the replica answers %+v, want %s %v", name, got, dns.RcodeToString[c.rcode], c.answer)
		}
	}

	// Names that do not depend on a namespace are answered in place.
	v := newNamespacesUnknownView(cfg, []string{"b", "c"})
	runCases(t, v, cfg, []tc{
		{qname: "pod.cluster.local.", qtype: A, soa: cl},
		{qname: "dns-version.cluster.local.", qtype: TXT, answer: []string{`dns-version.cluster.local. 28800 IN TXT "1.1.0"`}},
	})
	if len(v.asked) != 0 {
		t.Errorf("replicas looked up for %v", v.asked)
	}

	// No replica to ask yet: SERVFAIL, neither an address nor NXDOMAIN.
	if r := Answer(cfg, newNamespacesUnknownView(cfg, []string{}), Question{Name: "10-1-2-3.ns1.pod.cluster.local.", Type: A}); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("no replica to ask: %+v, want SERVFAIL", r)
	}

	// Pods disabled: nothing to ask.
	off := testConfig()
	off.Pods = PodsDisabled
	v = newNamespacesUnknownView(off, []string{"b", "c"})
	runCases(t, v, off, []tc{{qname: "10-1-2-3.ns1.pod.cluster.local.", qtype: A, rcode: NX, soa: cl}})
	if len(v.asked) != 0 {
		t.Errorf("pods disabled: replicas looked up for %v", v.asked)
	}
}

func TestAnswerBeforeSync(t *testing.T) {
	cfg := testConfig()
	v := buildView(t, cfg, false, testCluster())
	runCases(t, v, cfg, []tc{
		{qname: "missing.ns1.svc.cluster.local.", qtype: A, rcode: dns.RcodeServerFailure},
		{qname: "svc1.ns1.svc.cluster.local.", qtype: A, answer: []string{"svc1.ns1.svc.cluster.local. 5 IN A 10.0.0.1"}},
	})
}

func TestAnswerOutsideZones(t *testing.T) {
	cfg := testConfig()
	v := buildView(t, cfg, true, testCluster())
	if r := Answer(cfg, v, Question{Name: "example.com.", Type: A}); !r.External {
		t.Fatalf("example.com. answered as a cluster name: %+v", r)
	}
}

func BenchmarkAnswer(b *testing.B) {
	cfg := testConfig()
	v := buildView(b, cfg, true, testCluster())
	qs := []Question{
		{Name: "svc1.ns1.svc.cluster.local.", Type: A},
		{Name: "_http._tcp.hdls.ns1.svc.cluster.local.", Type: SRV},
		{Name: "1.0.0.10.in-addr.arpa.", Type: PTRt},
		{Name: "missing.ns1.svc.cluster.local.", Type: A},
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if r := Answer(cfg, v, qs[i%len(qs)]); r.External {
			b.Fatal("external")
		}
	}
}

func TestAnswerPodsVerified(t *testing.T) {
	cfg := testConfig()
	cfg.Pods = PodsVerified
	cfg.Domains.PodZones = true
	cfg.Prepare()
	objs := append(testCluster(), &model.Pod{Namespace: "ns1", Name: "web-0", IPs: ips("10.1.2.3", "fd00::9")})
	v := NewStatic(cfg, objs, true)
	runCases(t, v, cfg, []tc{
		{qname: "10-1-2-3.ns1.pod.cluster.local.", qtype: A, answer: []string{"10-1-2-3.ns1.pod.cluster.local. 5 IN A 10.1.2.3"}},
		{qname: "fd00--9.ns1.pod.cluster.local.", qtype: AAAA, answer: []string{"fd00--9.ns1.pod.cluster.local. 5 IN AAAA fd00::9"}},
		// Verified: only addresses of pods in that namespace answer.
		{qname: "10-1-2-4.ns1.pod.cluster.local.", qtype: A, rcode: NX, soa: cl},
		{qname: "10-1-2-3.ns2.pod.cluster.local.", qtype: A, rcode: NX, soa: cl},
		{qname: "10-1-2-3.nons.pod.cluster.local.", qtype: A, rcode: NX, soa: cl},
		{qname: "ns1.pod.cluster.local.", qtype: A, soa: cl},
		{qname: "ns2.pod.cluster.local.", qtype: A, soa: cl},
	})
}

func TestAnswerIgnoreEmptyService(t *testing.T) {
	cfg := testConfig()
	cfg.IgnoreEmptyService = true
	v := buildView(t, cfg, true, testCluster())
	runCases(t, v, cfg, []tc{
		{qname: "svc2.ns2.svc.cluster.local.", qtype: A, rcode: NX, soa: cl}, // no endpoints
		{qname: "svc1.ns1.svc.cluster.local.", qtype: A, answer: []string{"svc1.ns1.svc.cluster.local. 5 IN A 10.0.0.1"}},
		{qname: "ext.ns1.svc.cluster.local.", qtype: CNAME, answer: []string{"ext.ns1.svc.cluster.local. 5 IN CNAME example.com."}},
	})
}

// A PTR into a namespace that is gone (or not exposed) is not answered.
func TestAnswerPTRNeedsExposedNamespace(t *testing.T) {
	cfg := testConfig()
	var objs []any
	for _, o := range testCluster() {
		if ns, ok := o.(*model.Namespace); ok && ns.Name == "ns2" {
			continue
		}
		objs = append(objs, o)
	}
	v := buildView(t, cfg, true, objs)
	runCases(t, v, cfg, []tc{
		{qname: "1.1.0.10.in-addr.arpa.", qtype: PTRt, rcode: NX, soa: "in-addr.arpa."},
		{qname: "1.0.0.10.in-addr.arpa.", qtype: PTRt, answer: []string{"1.0.0.10.in-addr.arpa. 5 IN PTR svc1.ns1.svc.cluster.local."}},
	})
}
