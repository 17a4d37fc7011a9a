package zone

import (
	"testing"

	"github.com/shardns/shardns/model"
)

// externalConfig serves k8s_external's example.org beside cluster.local,
// as `k8s_external example.org` (headless when asked) does.
func externalConfig(headless bool) *Config {
	cfg := testConfig()
	cfg.Domains.External, cfg.Domains.ExternalApex = []string{"example.org."}, "dns"
	cfg.External = &External{Zones: cfg.Domains.External, Apex: "dns", TTL: 5, Headless: headless}
	cfg.Prepare()
	return cfg
}

// externalCluster adds Services with external and load balancer IPs to
// testCluster.
func externalCluster() []any {
	http := model.Port{Name: "http", Protocol: "TCP", Port: 80}
	https := model.Port{Name: "https", Protocol: "TCP", Port: 443}
	return append(testCluster(),
		&model.Service{Namespace: "ns1", Name: "lb", ClusterIPs: ips("10.0.0.9"), Ports: []model.Port{http, https},
			ExternalIPs: ips("192.0.2.1", "2001:db8::1", "198.51.100.7", "192.0.2.1")},
		&model.Service{Namespace: "ns1", Name: "noports", ClusterIPs: ips("10.0.0.10"), ExternalIPs: ips("192.0.2.9")},
		&model.Service{Namespace: "ns2", Name: "hdlsext", Type: model.ServiceHeadless, Ports: []model.Port{http},
			ExternalIPs: ips("192.0.2.2")},
	)
}

const eo = "example.org."

func TestAnswerExternal(t *testing.T) {
	cfg := externalConfig(false)
	v := buildView(t, cfg, true, externalCluster())
	runCases(t, v, cfg, []tc{
		{qname: "lb.ns1.example.org.", qtype: A, answer: []string{
			"lb.ns1.example.org. 5 IN A 192.0.2.1", "lb.ns1.example.org. 5 IN A 198.51.100.7"}},
		{qname: "lb.ns1.example.org.", qtype: AAAA, answer: []string{"lb.ns1.example.org. 5 IN AAAA 2001:db8::1"}},
		// Eight entries (four addresses, two ports): weight 12 each.
		{qname: "lb.ns1.example.org.", qtype: SRV, answer: []string{
			"lb.ns1.example.org. 5 IN SRV 0 12 80 lb.ns1.example.org.",
			"lb.ns1.example.org. 5 IN SRV 0 12 443 lb.ns1.example.org."}, extra: []string{
			"lb.ns1.example.org. 5 IN A 192.0.2.1", "lb.ns1.example.org. 5 IN AAAA 2001:db8::1",
			"lb.ns1.example.org. 5 IN A 198.51.100.7"}},
		{qname: "_https._tcp.lb.ns1.example.org.", qtype: SRV, answer: []string{
			"_https._tcp.lb.ns1.example.org. 5 IN SRV 0 25 443 lb.ns1.example.org."}, extra: []string{
			"lb.ns1.example.org. 5 IN A 192.0.2.1", "lb.ns1.example.org. 5 IN AAAA 2001:db8::1",
			"lb.ns1.example.org. 5 IN A 198.51.100.7"}},
		{qname: "_ftp._tcp.lb.ns1.example.org.", qtype: SRV, rcode: NX, soa: eo},
		// Any one label before the service: the external IPs, as CoreDNS.
		{qname: "x.lb.ns1.example.org.", qtype: A, answer: []string{
			"x.lb.ns1.example.org. 5 IN A 192.0.2.1", "x.lb.ns1.example.org. 5 IN A 198.51.100.7"}},
		{qname: "lb.ns1.example.org.", qtype: TXT, soa: eo},
		{qname: "svc1.ns1.example.org.", qtype: A, rcode: NX, soa: eo},    // no external IP
		{qname: "noports.ns1.example.org.", qtype: A, rcode: NX, soa: eo}, // no port: no entry
		{qname: "hdls.ns1.example.org.", qtype: A, rcode: NX, soa: eo},    // headless is off
		{qname: "hdlsext.ns2.example.org.", qtype: A, answer: []string{"hdlsext.ns2.example.org. 5 IN A 192.0.2.2"}},
		{qname: "lb.nons.example.org.", qtype: A, rcode: NX, soa: eo},
		{qname: "ns1.example.org.", qtype: A, soa: eo},
		{qname: "nons.example.org.", qtype: A, rcode: NX, soa: eo},
		{qname: "a.b.c.lb.ns1.example.org.", qtype: A, rcode: NX, soa: eo},
		{qname: eo, qtype: SOA, answer: []string{
			"example.org. 5 IN SOA ns1.dns.example.org. hostmaster.dns.example.org. 1 7200 1800 86400 5"}},
		{qname: eo, qtype: NS, answer: []string{"example.org. 5 IN NS ns1.dns.example.org."},
			extra: []string{"ns1.dns.example.org. 5 IN A 10.96.0.10"}},
		{qname: eo, qtype: A, soa: eo},
		{qname: "dns.example.org.", qtype: A, soa: eo},
		{qname: "ns1.dns.example.org.", qtype: A, answer: []string{"ns1.dns.example.org. 5 IN A 10.96.0.10"}},
		{qname: "ns1.dns.example.org.", qtype: AAAA, soa: eo},
		{qname: "ns2.dns.example.org.", qtype: A, rcode: NX, soa: eo},
		// Cluster names are unchanged.
		{qname: "lb.ns1.svc.cluster.local.", qtype: A, answer: []string{"lb.ns1.svc.cluster.local. 5 IN A 10.0.0.9"}},
	})
}

func TestAnswerExternalHeadless(t *testing.T) {
	cfg := externalConfig(true)
	v := buildView(t, cfg, true, externalCluster())
	runCases(t, v, cfg, []tc{
		{qname: "hdls.ns1.example.org.", qtype: A, answer: []string{
			"hdls.ns1.example.org. 5 IN A 172.16.0.1", "hdls.ns1.example.org. 5 IN A 172.16.0.2"}},
		{qname: "hdls.ns1.example.org.", qtype: AAAA, answer: []string{"hdls.ns1.example.org. 5 IN AAAA fd00:1::1"}},
		{qname: "web-0.hdls.ns1.example.org.", qtype: A, answer: []string{"web-0.hdls.ns1.example.org. 5 IN A 172.16.0.1"}},
		{qname: "web-3.hdls.ns1.example.org.", qtype: A, rcode: NX, soa: eo}, // not ready
		{qname: "_http._tcp.hdls.ns1.example.org.", qtype: SRV, answer: []string{
			"_http._tcp.hdls.ns1.example.org. 5 IN SRV 0 33 80 web-0.hdls.ns1.example.org.",
			"_http._tcp.hdls.ns1.example.org. 5 IN SRV 0 33 80 172-16-0-2.hdls.ns1.example.org.",
			"_http._tcp.hdls.ns1.example.org. 5 IN SRV 0 33 80 fd00-1--1.hdls.ns1.example.org."}, extra: []string{
			"web-0.hdls.ns1.example.org. 5 IN A 172.16.0.1", "172-16-0-2.hdls.ns1.example.org. 5 IN A 172.16.0.2",
			"fd00-1--1.hdls.ns1.example.org. 5 IN AAAA fd00:1::1"}},
		// An endpoint of a ClusterIP service without external IPs.
		{qname: "b1.svc1.ns1.example.org.", qtype: A, answer: []string{"b1.svc1.ns1.example.org. 5 IN A 172.16.1.1"}},
		{qname: "svc1.ns1.example.org.", qtype: A, rcode: NX, soa: eo},
		// External IPs win over endpoints.
		{qname: "hdlsext.ns2.example.org.", qtype: A, answer: []string{"hdlsext.ns2.example.org. 5 IN A 192.0.2.2"}},
	})
}

// A replica that does not hold the namespace's service zone sends an
// external name to its owners, under the key they hold it by.
func TestAnswerExternalRemote(t *testing.T) {
	cfg := externalConfig(false)
	sv := NewStatic(cfg, externalCluster(), true)
	delete(sv.zones, "ns1.svc.cluster.local.")
	v := &remoteView{Static: sv, remote: map[string][]string{"ns1.svc.cluster.local.": {"r2", "r3"}}}
	r := Answer(cfg, v, Question{Name: "lb.ns1.example.org.", Type: A})
	if r.Zone != "ns1.svc.cluster.local." || len(r.Remote) != 2 {
		t.Fatalf("response %+v, want the owners of ns1.svc.cluster.local.", r)
	}
	if k := KeyOf(cfg, v, "lb.ns1.example.org."); k != r.Zone {
		t.Errorf("KeyOf = %q, want %q: an owner would refuse the question", k, r.Zone)
	}
}
