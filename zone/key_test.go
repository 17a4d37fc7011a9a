package zone

import "testing"

func TestRoute(t *testing.T) {
	d := &Domains{Cluster: []string{"cluster.local."}, Reverse: []string{"in-addr.arpa.", "ip6.arpa."}}
	cases := []struct {
		name, qname string
		kind        RouteKind
		key, origin string
	}{
		{"service", "web.ns1.svc.cluster.local.", RouteZone, "ns1.svc.cluster.local.", "cluster.local."},
		{"srv", "_http._tcp.web.ns1.svc.cluster.local.", RouteZone, "ns1.svc.cluster.local.", "cluster.local."},
		{"namespace apex", "ns1.svc.cluster.local.", RouteZone, "ns1.svc.cluster.local.", "cluster.local."},
		{"svc", "svc.cluster.local.", RouteStateless, "", "cluster.local."},
		{"pod", "10-0-0-1.ns1.pod.cluster.local.", RouteStateless, "", "cluster.local."},
		{"apex", "cluster.local.", RouteApex, "", "cluster.local."},
		{"dns-version", "dns-version.cluster.local.", RouteStateless, "", "cluster.local."},
		{"label boundary", "xcluster.local.", RouteExternal, "", ""},
		{"external", "example.com.", RouteExternal, "", ""},
		{"ptr v4", "4.3.2.10.in-addr.arpa.", RouteZone, "3.2.10.in-addr.arpa.", "in-addr.arpa."},
		{"ptr v4 /24 name", "3.2.10.in-addr.arpa.", RouteZone, "3.2.10.in-addr.arpa.", "in-addr.arpa."},
		{"ptr v4 short", "2.10.in-addr.arpa.", RouteReverseApex, "", "in-addr.arpa."},
		{"reverse apex", "in-addr.arpa.", RouteReverseApex, "", "in-addr.arpa."},
		{"ptr v6", "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", RouteZone,
			"0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", "ip6.arpa."},
		{"ptr v6 short", "0.0.d.f.ip6.arpa.", RouteReverseApex, "", "ip6.arpa."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := d.Route(c.qname)
			if r.Kind != c.kind || r.Key != c.key || r.Origin != c.origin {
				t.Fatalf("Route(%s) = %+v, want kind %d key %q origin %q", c.qname, r, c.kind, c.key, c.origin)
			}
		})
	}
}

// The zone key of every record a zone holds must route back to that zone.
func TestRouteAgreesWithBuild(t *testing.T) {
	cfg := testConfig()
	v := NewStatic(cfg, testCluster(), true)
	for key, s := range v.zones {
		for _, name := range s.names() {
			if got := cfg.Domains.Route(name).Key; got != key {
				t.Errorf("%s is built in zone %s but routes to %q", name, key, got)
			}
		}
	}
}

func TestLowerASCIIKeepsOtherBytes(t *testing.T) {
	for in, want := range map[string]string{
		"Web.Default.SVC.cluster.local.": "web.default.svc.cluster.local.",
		"web.default.":                   "web.default.",
		"\xf3\xacA.":                     "\xf3\xaca.", // not UTF-8: kept byte for byte
		"ÉCOLE.":                         "École.",     // only ASCII letters fold (RFC 4343)
	} {
		if got := LowerASCII(in); got != want {
			t.Errorf("LowerASCII(%q) = %q, want %q", in, got, want)
		}
	}
}
