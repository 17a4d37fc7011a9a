package zone

import (
	"testing"

	"github.com/shardns/shardns/model"
)

// multiclusterConfig serves clusterset.local beside cluster.local, as
// `kubernetes cluster.local clusterset.local { multicluster clusterset.local }`.
func multiclusterConfig() *Config {
	cfg := testConfig()
	cfg.Domains.Multicluster = []string{"clusterset.local."}
	cfg.Prepare()
	return cfg
}

// multiclusterCluster adds to testCluster what an MCS implementation
// writes: a ClusterSetIP import (web), a headless one (db) with slices
// from two clusters, one without ports, an import without ports (bare)
// and one whose service has no ready endpoint (idle), in ns1, and an
// import in a namespace with no Service at all (only).
func multiclusterCluster() []any {
	http := model.Port{Name: "http", Protocol: "TCP", Port: 80}
	slice := func(name, service, cluster string, ports []model.Port, eps ...model.Endpoint) *model.MultiClusterSlice {
		return &model.MultiClusterSlice{ClusterID: cluster, EndpointSlice: model.EndpointSlice{
			Namespace: "ns1", Name: name, ServiceName: service, Ports: ports, Endpoints: eps}}
	}
	return append(testCluster(),
		&model.Namespace{Name: "only"},
		&model.ServiceImport{Namespace: "ns1", Name: "web", IPs: ips("10.42.0.1", "fd00:42::1"),
			Ports: []model.Port{http, {Name: "dns", Protocol: "UDP", Port: 53}}},
		&model.ServiceImport{Namespace: "ns1", Name: "db", Headless: true, Ports: []model.Port{http}},
		&model.ServiceImport{Namespace: "ns1", Name: "bare", IPs: ips("10.42.0.2")},
		&model.ServiceImport{Namespace: "ns1", Name: "idle", Headless: true},
		&model.ServiceImport{Namespace: "only", Name: "api", IPs: ips("10.42.0.3"), Ports: []model.Port{http}},
		slice("db-east", "db", "east", []model.Port{http},
			model.Endpoint{Addresses: ips("172.20.0.1"), Hostname: "db-0", Ready: true},
			model.Endpoint{Addresses: ips("172.20.0.2"), Ready: true},
			model.Endpoint{Addresses: ips("172.20.0.3"), Hostname: "db-2"}),
		slice("db-west", "db", "west", nil,
			model.Endpoint{Addresses: ips("fd00:20::1"), Hostname: "db-0", Ready: true}),
		slice("idle-east", "idle", "east", []model.Port{http},
			model.Endpoint{Addresses: ips("172.20.1.1")}),
		// A slice of the cluster's own db: not imported, never answered
		// under clusterset.local.
		&model.EndpointSlice{Namespace: "ns1", Name: "db-local", ServiceName: "db", Ports: []model.Port{http},
			Endpoints: []model.Endpoint{{Addresses: ips("172.16.9.9"), Ready: true}}},
	)
}

const cs = "clusterset.local."

func TestAnswerMulticluster(t *testing.T) {
	cfg := multiclusterConfig()
	v := buildView(t, cfg, true, multiclusterCluster())
	runCases(t, v, cfg, []tc{
		// ClusterSetIP: the import's IPs.
		{qname: "web.ns1.svc.clusterset.local.", qtype: A, answer: []string{"web.ns1.svc.clusterset.local. 5 IN A 10.42.0.1"}},
		{qname: "web.ns1.svc.clusterset.local.", qtype: AAAA, answer: []string{"web.ns1.svc.clusterset.local. 5 IN AAAA fd00:42::1"}},
		{qname: "web.ns1.svc.clusterset.local.", qtype: TXT, soa: cs},
		// Four entries (two IPs, two ports): weight 25.
		{qname: "web.ns1.svc.clusterset.local.", qtype: SRV, answer: []string{
			"web.ns1.svc.clusterset.local. 5 IN SRV 0 25 80 web.ns1.svc.clusterset.local.",
			"web.ns1.svc.clusterset.local. 5 IN SRV 0 25 53 web.ns1.svc.clusterset.local."}, extra: []string{
			"web.ns1.svc.clusterset.local. 5 IN A 10.42.0.1", "web.ns1.svc.clusterset.local. 5 IN AAAA fd00:42::1"}},
		{qname: "_dns._udp.web.ns1.svc.clusterset.local.", qtype: SRV, answer: []string{
			"_dns._udp.web.ns1.svc.clusterset.local. 5 IN SRV 0 50 53 web.ns1.svc.clusterset.local."}, extra: []string{
			"web.ns1.svc.clusterset.local. 5 IN A 10.42.0.1", "web.ns1.svc.clusterset.local. 5 IN AAAA fd00:42::1"}},
		{qname: "_ftp._tcp.web.ns1.svc.clusterset.local.", qtype: SRV, rcode: NX, soa: cs},
		{qname: "bare.ns1.svc.clusterset.local.", qtype: A, rcode: NX, soa: cs}, // no port: no entry, as CoreDNS
		{qname: "api.only.svc.clusterset.local.", qtype: A, answer: []string{"api.only.svc.clusterset.local. 5 IN A 10.42.0.3"}},
		// Headless: the ready endpoints of every cluster.
		{qname: "db.ns1.svc.clusterset.local.", qtype: A, answer: []string{
			"db.ns1.svc.clusterset.local. 5 IN A 172.20.0.1", "db.ns1.svc.clusterset.local. 5 IN A 172.20.0.2"}},
		{qname: "db.ns1.svc.clusterset.local.", qtype: AAAA, answer: []string{"db.ns1.svc.clusterset.local. 5 IN AAAA fd00:20::1"}},
		// Three entries, one without a port: weight 33, two SRV records.
		{qname: "db.ns1.svc.clusterset.local.", qtype: SRV, answer: []string{
			"db.ns1.svc.clusterset.local. 5 IN SRV 0 33 80 db-0.east.db.ns1.svc.clusterset.local.",
			"db.ns1.svc.clusterset.local. 5 IN SRV 0 33 80 172-20-0-2.east.db.ns1.svc.clusterset.local."}, extra: []string{
			"db-0.east.db.ns1.svc.clusterset.local. 5 IN A 172.20.0.1",
			"172-20-0-2.east.db.ns1.svc.clusterset.local. 5 IN A 172.20.0.2"}},
		{qname: "_http._tcp.db.ns1.svc.clusterset.local.", qtype: SRV, answer: []string{
			"_http._tcp.db.ns1.svc.clusterset.local. 5 IN SRV 0 50 80 db-0.east.db.ns1.svc.clusterset.local.",
			"_http._tcp.db.ns1.svc.clusterset.local. 5 IN SRV 0 50 80 172-20-0-2.east.db.ns1.svc.clusterset.local."}, extra: []string{
			"db-0.east.db.ns1.svc.clusterset.local. 5 IN A 172.20.0.1",
			"172-20-0-2.east.db.ns1.svc.clusterset.local. 5 IN A 172.20.0.2"}},
		// <hostname>.<clusterid>.<service>: one cluster's endpoint.
		{qname: "db-0.east.db.ns1.svc.clusterset.local.", qtype: A, answer: []string{"db-0.east.db.ns1.svc.clusterset.local. 5 IN A 172.20.0.1"}},
		{qname: "db-0.west.db.ns1.svc.clusterset.local.", qtype: AAAA, answer: []string{"db-0.west.db.ns1.svc.clusterset.local. 5 IN AAAA fd00:20::1"}},
		{qname: "db-0.west.db.ns1.svc.clusterset.local.", qtype: A, soa: cs},
		{qname: "db-2.east.db.ns1.svc.clusterset.local.", qtype: A, rcode: NX, soa: cs}, // not ready
		{qname: "db-0.north.db.ns1.svc.clusterset.local.", qtype: A, rcode: NX, soa: cs},
		{qname: "db-0.db.ns1.svc.clusterset.local.", qtype: A, rcode: NX, soa: cs}, // no cluster label
		{qname: "a.b.c.db.ns1.svc.clusterset.local.", qtype: A, rcode: NX, soa: cs},
		{qname: "idle.ns1.svc.clusterset.local.", qtype: A, rcode: NX, soa: cs},
		// Names that are not imports.
		{qname: "svc1.ns1.svc.clusterset.local.", qtype: A, rcode: NX, soa: cs},
		{qname: "none.ns1.svc.clusterset.local.", qtype: A, rcode: NX, soa: cs},
		{qname: "web.nons.svc.clusterset.local.", qtype: A, rcode: NX, soa: cs},
		{qname: "ns1.svc.clusterset.local.", qtype: A, soa: cs},
		{qname: "ns2.svc.clusterset.local.", qtype: A, soa: cs},
		// The zone itself, as a cluster domain.
		{qname: "clusterset.local.", qtype: SOA, answer: []string{
			"clusterset.local. 5 IN SOA ns.dns.clusterset.local. hostmaster.clusterset.local. 1 7200 1800 86400 5"}},
		{qname: "clusterset.local.", qtype: NS, answer: []string{"clusterset.local. 5 IN NS ns.dns.clusterset.local."},
			extra: []string{"ns.dns.clusterset.local. 5 IN A 10.96.0.10"}},
		{qname: "dns-version.clusterset.local.", qtype: TXT, answer: []string{`dns-version.clusterset.local. 28800 IN TXT "1.1.0"`}},
		{qname: "10-1-2-3.ns1.pod.clusterset.local.", qtype: A, answer: []string{"10-1-2-3.ns1.pod.clusterset.local. 5 IN A 10.1.2.3"}},
		{qname: "x.clusterset.local.", qtype: A, rcode: NX, soa: cs},
		// The cluster's own names are not changed by imports.
		{qname: "web.ns1.svc.cluster.local.", qtype: A, rcode: NX, soa: "cluster.local."},
		{qname: "api.only.svc.cluster.local.", qtype: A, rcode: NX, soa: "cluster.local."},
		{qname: "svc1.ns1.svc.cluster.local.", qtype: A, answer: []string{"svc1.ns1.svc.cluster.local. 5 IN A 10.0.0.1"}},
	})
}

// Names of a multicluster zone go to the service zone of their namespace
// in the first cluster domain, so the owner of the namespace answers them.
func TestRouteMulticluster(t *testing.T) {
	cfg := multiclusterConfig()
	for name, want := range map[string]Route{
		"web.ns1.svc.clusterset.local.":            {Kind: RouteZone, Origin: cs, Key: "ns1.svc.cluster.local.", Multicluster: true},
		"_http._tcp.web.ns1.svc.clusterset.local.": {Kind: RouteZone, Origin: cs, Key: "ns1.svc.cluster.local.", Multicluster: true},
		"ns1.svc.clusterset.local.":                {Kind: RouteZone, Origin: cs, Key: "ns1.svc.cluster.local.", Multicluster: true},
		"1-2-3-4.ns1.pod.clusterset.local.":        {Kind: RouteStateless, Origin: cs, Multicluster: true},
		"clusterset.local.":                        {Kind: RouteApex, Origin: cs},
		"web.ns1.svc.cluster.local.":               {Kind: RouteZone, Origin: "cluster.local.", Key: "ns1.svc.cluster.local."},
		"db-0.east.db.ns1.svc.clusterset.local.":   {Kind: RouteZone, Origin: cs, Key: "ns1.svc.cluster.local.", Multicluster: true},
		"example.com.":                             {Kind: RouteExternal},
		"clusterset.local.example.com.":            {Kind: RouteExternal},
		"svc.clusterset.local.":                    {Kind: RouteStateless, Origin: cs, Multicluster: true},
	} {
		if got := cfg.Domains.Route(name); got != want {
			t.Errorf("Route(%s) = %+v, want %+v", name, got, want)
		}
	}
}
