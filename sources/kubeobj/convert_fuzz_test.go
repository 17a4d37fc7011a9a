package kubeobj

import (
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// checkZonedIPs: an IPv6 address with a zone ("fe80::1%eth0") is accepted
// as a cluster IP or an endpoint address, because netip.ParseAddr allows
// zones; such an address gets no PTR, and its dashed name keeps the "%".
// Set it to true when the converters reject zones.
const checkZonedIPs = true

// fuzzConfig is the zone configuration of zone/answer_test.go.
func fuzzConfig() *zone.Config {
	cfg := &zone.Config{
		Domains: zone.Domains{Cluster: []string{"cluster.local."}, Reverse: []string{"in-addr.arpa.", "ip6.arpa."}},
		TTL:     5,
		Pods:    zone.PodsInsecure,
		NSAddrs: []netip.Addr{netip.MustParseAddr("10.96.0.10")},
	}
	cfg.Prepare()
	return cfg
}

// view is a zone.Reader over a directory and a few snapshots.
type view struct {
	dir   *zone.Directory
	zones map[string]*zone.Snapshot
}

func (v *view) Directory() *zone.Directory     { return v.dir }
func (v *view) Zone(key string) *zone.Snapshot { return v.zones[key] }
func (v *view) Remote(string) []string         { return nil }
func (v *view) FanOut(string) []string         { return nil }
func (v *view) Loading(string) bool            { return false }

func split(s string) []string    { return strings.Split(s, ",") }
func ptr[T any](v T) *T          { return &v }
func cut(s string, n int) string { return s[:min(len(s), n)] }

// dns1123 is a Kubernetes object name that is also a DNS label.
var dns1123 = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

func isDNSLabel(s string) bool { return dns1123.MatchString(s) }

// addrsOf splits addresses by family, sorted and without duplicates.
func addrsOf(ips []netip.Addr) (v4, v6 []string) {
	for _, ip := range ips {
		if ip.Is4() {
			v4 = append(v4, ip.String())
		} else {
			v6 = append(v6, ip.String())
		}
	}
	slices.Sort(v4)
	slices.Sort(v6)
	return slices.Compact(v4), slices.Compact(v6)
}

// build makes the service zone of namespace ns from services and slices,
// and the reverse zones of their PTRs, as the zone actors would.
func build(t *testing.T, cfg *zone.Config, ns string, services map[string]*model.Service,
	slices map[string]*model.EndpointSlice) *view {
	t.Helper()
	v := &view{dir: zone.NewDirectory(cfg, map[string]struct{}{strings.ToLower(ns): {}}, true, 1),
		zones: map[string]*zone.Snapshot{}}
	key := zone.ServiceZoneKey(ns, cfg.Primary())
	v.zones[key] = zone.BuildServiceZone(cfg, key, cfg.Primary(), 1, services, slices)
	ptrs := map[string]map[model.Key]zone.PTRList{}
	add := func(k model.Key, obj any) {
		for zk, p := range zone.PTRs(cfg, obj) {
			r := cfg.Domains.Route(zk)
			if r.Kind != zone.RouteZone || !r.Reverse || r.Key != zk {
				t.Fatalf("PTRs of %s in zone %q, which routes as %+v", k, zk, r)
			}
			for _, x := range p {
				if zone.ReverseZoneKey(x.Addr) != zk {
					t.Fatalf("PTR of %v in zone %q, want %q", x.Addr, zk, zone.ReverseZoneKey(x.Addr))
				}
			}
			if ptrs[zk] == nil {
				ptrs[zk] = map[model.Key]zone.PTRList{}
			}
			ptrs[zk][k] = zone.PackPTRs(p)
		}
	}
	for _, s := range services {
		add(s.Key(), s)
	}
	for _, s := range slices {
		add(s.Key(), s)
	}
	for zk, p := range ptrs {
		v.zones[zk] = zone.BuildReverseZone(cfg, zk, cfg.Domains.Route(zk).Origin, 1, p)
	}
	return v
}

// ask answers name and packs the answer: an object name that is no DNS
// name may not pack, but nothing panics.
func ask(t *testing.T, cfg *zone.Config, v zone.Reader, name string, qtype uint16) zone.Response {
	t.Helper()
	name = zone.Fqdn(name)
	r := zone.Answer(cfg, v, zone.Question{Name: name, Type: qtype})
	if r.External {
		t.Fatalf("%s is outside the cluster", name)
	}
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Rcode, m.Answer, m.Ns, m.Extra = r.Rcode, r.Answer, r.Ns, r.Extra
	m.Pack()
	return r
}

// askPTR asks the PTR of a. A zoned address has no reverse name.
func askPTR(t *testing.T, cfg *zone.Config, v zone.Reader, a netip.Addr) {
	t.Helper()
	if name := zone.ReverseName(a); name != "" || checkZonedIPs {
		ask(t, cfg, v, name, dns.TypePTR)
	}
}

func answers(r zone.Response) (v4, v6 []string) {
	for _, rr := range r.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			v4 = append(v4, rr.A.String())
		case *dns.AAAA:
			v6 = append(v6, rr.AAAA.String())
		}
	}
	slices.Sort(v4)
	slices.Sort(v6)
	return v4, v6
}

func checkAddrs(t *testing.T, what string, addrs []netip.Addr) {
	t.Helper()
	for _, a := range addrs {
		if !a.IsValid() || a.Is4In6() {
			t.Fatalf("%s: address %v accepted", what, a)
		}
		if checkZonedIPs && a.Zone() != "" {
			t.Fatalf("%s: address %v with a zone accepted", what, a)
		}
	}
}

func hasZone(addrs []netip.Addr) bool {
	return slices.ContainsFunc(addrs, func(a netip.Addr) bool { return a.Zone() != "" })
}

func FuzzService(f *testing.F) {
	type seed struct {
		name, ns, typ, clusterIP, clusterIPs, externalName, portName, proto string
		port1, port2                                                        int32
	}
	for _, s := range []seed{
		{"web", "shop", "", "10.96.0.5", "10.96.0.5,fd00::5", "", "http", "", 80, 443},
		{"web", "shop", "ClusterIP", "10.96.0.5", "", "", "http", "TCP", 80, 0},
		{"dns", "kube-system", "ClusterIP", "10.96.0.10", "10.96.0.10", "", "dns", "UDP", 53, 53},
		{"lb", "shop", "LoadBalancer", "fd00::1", "fd00::1,10.0.0.1", "", "https", "SCTP", 443, 8443},
		{"mapped", "shop", "NodePort", "::ffff:10.0.0.1", "", "", "x", "TCP", 1, 65535},
		{"db", "data", "ClusterIP", "None", "None", "", "pg", "TCP", 5432, 0},
		{"ext", "shop", "ExternalName", "", "", "Payments.Example.COM.", "", "", 0, 0},
		{"self", "shop", "ExternalName", "", "", "self.shop.svc.cluster.local", "", "", 0, 0},
		{"ip", "shop", "ExternalName", "", "", "10.0.0.1", "", "", 0, 0},
		{"web", "shop", "", "", "", "", "http", "", 80, 0},
		{"web", "shop", "", "10.0.0.300", "", "", "http", "", 80, 0},
		{"web", "shop", "", "10.0.0.1", "", "", "http", "", 0, 0},
		{"web", "shop", "", "10.0.0.1", "", "", "http", "", 65536, 0},
		{"web", "shop", "", "10.0.0.1", "", "", "http", "", -1, 0},
		{"", "shop", "", "10.0.0.1", "", "", "", "", 80, 0},
		{"x", "", "ExternalName", "", "", "", "", "", 0, 0},
		{"zoned", "shop", "", "fe80::1%eth0", "", "", "http", "", 80, 0},
		{"Web", "Shop", "", "0.0.0.0", "::", "", "_http", "tcp", 80, 80},
	} {
		f.Add(s.name, s.ns, s.typ, s.clusterIP, s.clusterIPs, s.externalName, s.portName, s.proto, s.port1, s.port2)
	}
	cfg := fuzzConfig()
	f.Fuzz(func(t *testing.T, name, ns, typ, clusterIP, clusterIPs, externalName, portName, proto string, port1, port2 int32) {
		in := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, ResourceVersion: "1"},
			Spec: corev1.ServiceSpec{
				Type:         corev1.ServiceType(typ),
				ClusterIP:    clusterIP,
				ExternalName: externalName,
			},
		}
		if clusterIPs != "" {
			in.Spec.ClusterIPs = split(clusterIPs)
		}
		for i, p := range []int32{port1, port2} {
			if p != 0 || i == 0 {
				in.Spec.Ports = append(in.Spec.Ports, corev1.ServicePort{
					Name: cut(portName, 20*(i+1)), Protocol: corev1.Protocol(proto), Port: p})
			}
		}
		s, err := Service(in)
		if err != nil {
			if s != nil {
				t.Fatalf("error %v with a service", err)
			}
			return
		}
		if s == nil {
			t.Fatal("nil service and no error")
		}
		if s.Name != name || s.Namespace != ns || s.Name == "" {
			t.Fatalf("key %s, want %s/%s", s.Key(), ns, name)
		}
		checkAddrs(t, s.Key().String(), s.ClusterIPs)
		for _, p := range s.Ports {
			if p.Port < 1 || p.Port > 65535 || p.Protocol == "" {
				t.Fatalf("port %+v accepted", p)
			}
		}
		switch s.Type {
		case model.ServiceClusterIP:
			if len(s.ClusterIPs) == 0 {
				t.Fatal("ClusterIP service without cluster IPs")
			}
		case model.ServiceHeadless:
			if len(s.ClusterIPs) > 0 {
				t.Fatalf("headless service with cluster IPs %v", s.ClusterIPs)
			}
		case model.ServiceExternalName:
			if len(s.ClusterIPs) > 0 || !strings.HasSuffix(s.ExternalName, ".") || s.ExternalName != strings.ToLower(s.ExternalName) {
				t.Fatalf("ExternalName %q with cluster IPs %v", s.ExternalName, s.ClusterIPs)
			}
		}

		v := build(t, cfg, ns, map[string]*model.Service{s.Name: s}, nil)
		base := s.Name + "." + s.Namespace + ".svc.cluster.local"
		for _, q := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeCNAME} {
			ask(t, cfg, v, base, q)
		}
		for _, p := range s.Ports {
			ask(t, cfg, v, "_"+p.Name+"._"+p.Protocol+"."+base, dns.TypeSRV)
		}
		for _, ip := range s.ClusterIPs {
			askPTR(t, cfg, v, ip)
		}

		// A well-named ClusterIP service with ports answers its cluster
		// IPs, and each has a PTR.
		if s.Type != model.ServiceClusterIP || len(s.Ports) == 0 || !isDNSLabel(s.Name) || !isDNSLabel(s.Namespace) ||
			(hasZone(s.ClusterIPs) && !checkZonedIPs) {
			return
		}
		want4, want6 := addrsOf(s.ClusterIPs)
		got4, _ := answers(ask(t, cfg, v, base, dns.TypeA))
		_, got6 := answers(ask(t, cfg, v, base, dns.TypeAAAA))
		if !slices.Equal(got4, want4) || !slices.Equal(got6, want6) {
			t.Fatalf("%s answers %v %v, want %v %v", base, got4, got6, want4, want6)
		}
		for _, ip := range s.ClusterIPs {
			r := ask(t, cfg, v, zone.ReverseName(ip), dns.TypePTR)
			if len(r.Answer) != 1 || r.Answer[0].(*dns.PTR).Ptr != base+"." {
				t.Fatalf("PTR of %v: %v, want %s.", ip, r.Answer, base)
			}
		}
	})
}

func FuzzEndpointSlice(f *testing.F) {
	type seed struct {
		name, ns, svc, addressType, addrs, hostname string
		hasHostname                                 bool
		ready                                       uint8 // 0: unset, 1: true, else false
		targetKind, targetName, portName, proto     string
		port                                        int32
		hasPort                                     bool
	}
	for _, s := range []seed{
		{"web-abc", "shop", "web", "IPv4", "10.244.1.10", "", false, 1, "Pod", "web-6d9f7-abcde", "http", "TCP", 8080, true},
		{"db-1", "data", "db", "IPv4", "10.244.3.20,10.244.3.21", "db-0", true, 0, "Pod", "db-0", "pg", "", 5432, true},
		{"db-2", "data", "db", "IPv4", "10.244.3.22", "db-2", true, 2, "Pod", "db-2", "pg", "TCP", 5432, true},
		{"v6", "shop", "api", "IPv6", "fd00:1::1,fd00:1::2", "", false, 0, "", "", "grpc", "UDP", 9090, true},
		{"mapped", "shop", "api", "IPv6", "::ffff:10.0.0.1", "", false, 0, "Node", "n1", "", "", 0, false},
		{"all-ports", "shop", "api", "IPv4", "10.0.0.1", "", false, 0, "Pod", "p", "", "", 0, false},
		{"fqdn", "shop", "ext", "FQDN", "example.com", "", false, 0, "", "", "", "", 80, true},
		{"orphan", "shop", "", "IPv4", "10.0.0.1", "", false, 0, "", "", "", "", 80, true},
		{"bad", "shop", "web", "IPv4", "10.0.0.300", "", false, 0, "", "", "", "", 80, true},
		{"bad-port", "shop", "web", "IPv4", "10.0.0.1", "", false, 0, "", "", "http", "", 70000, true},
		{"zero-port", "shop", "web", "IPv4", "10.0.0.1", "", false, 0, "", "", "http", "", 0, true},
		{"", "", "web", "IPv4", "10.0.0.1", "", false, 0, "", "", "", "", 80, true},
		{"zoned", "shop", "web", "IPv6", "fe80::1%eth0", "", false, 0, "", "", "", "", 80, true},
		{"empty-host", "shop", "web", "IPv4", "10.0.0.1", "", true, 1, "", "", "", "", 80, true},
		{"Upper", "Shop", "WEB", "IPv4", "10.0.0.1,10.0.0.1", "Web-0", true, 1, "Pod", "P", "HTTP", "tcp", 80, true},
	} {
		f.Add(s.name, s.ns, s.svc, s.addressType, s.addrs, s.hostname, s.hasHostname, s.ready,
			s.targetKind, s.targetName, s.portName, s.proto, s.port, s.hasPort)
	}
	cfg := fuzzConfig()
	f.Fuzz(func(t *testing.T, name, ns, svc, addressType, addrs, hostname string, hasHostname bool, ready uint8,
		targetKind, targetName, portName, proto string, port int32, hasPort bool) {
		in := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: ns, ResourceVersion: "1"},
			AddressType: discoveryv1.AddressType(addressType),
		}
		if svc != "" {
			in.Labels = map[string]string{ServiceNameLabel: svc}
		}
		ep := discoveryv1.Endpoint{}
		if addrs != "" {
			ep.Addresses = split(addrs)
		}
		if hasHostname {
			ep.Hostname = ptr(hostname)
		}
		switch ready {
		case 0:
		case 1:
			ep.Conditions.Ready = ptr(true)
		default:
			ep.Conditions.Ready = ptr(false)
		}
		if targetKind != "" {
			ep.TargetRef = &corev1.ObjectReference{Kind: targetKind, Name: targetName}
		}
		// A second endpoint: ready, no hostname, the first address.
		in.Endpoints = []discoveryv1.Endpoint{ep, {Addresses: ep.Addresses[:min(len(ep.Addresses), 1)]}}
		p := discoveryv1.EndpointPort{Name: ptr(portName)}
		if hasPort {
			p.Port = ptr(port)
		}
		if proto != "" {
			p.Protocol = ptr(corev1.Protocol(proto))
		}
		in.Ports = []discoveryv1.EndpointPort{p}

		s, err := EndpointSlice(in)
		if err != nil {
			if s != nil {
				t.Fatalf("error %v with a slice", err)
			}
			return
		}
		if s == nil {
			if svc != "" && addressType != string(discoveryv1.AddressTypeFQDN) {
				t.Fatalf("slice of service %q, type %q skipped", svc, addressType)
			}
			return
		}
		if s.Name != name || s.Namespace != ns || s.ServiceName != svc || svc == "" {
			t.Fatalf("slice %s of %q, want %s/%s of %q", s.Key(), s.ServiceName, ns, name, svc)
		}
		if len(s.Endpoints) != len(in.Endpoints) {
			t.Fatalf("%d endpoints, want %d", len(s.Endpoints), len(in.Endpoints))
		}
		for _, p := range s.Ports {
			if p.Port < 1 || p.Port > 65535 || p.Protocol == "" {
				t.Fatalf("port %+v accepted", p)
			}
		}
		for _, e := range s.Endpoints {
			checkAddrs(t, s.Key().String(), e.Addresses)
		}

		for _, headless := range []bool{true, false} {
			service := &model.Service{Namespace: ns, Name: strings.ToLower(svc), Type: model.ServiceHeadless}
			if !headless {
				service.Type = model.ServiceClusterIP
				service.ClusterIPs = []netip.Addr{netip.MustParseAddr("10.96.0.1")}
				service.Ports = []model.Port{{Name: "http", Protocol: "TCP", Port: 80}}
			}
			v := build(t, cfg, ns, map[string]*model.Service{service.Name: service}, map[string]*model.EndpointSlice{s.Name: s})
			base := service.Name + "." + ns + ".svc.cluster.local"
			for _, q := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV} {
				ask(t, cfg, v, base, q)
			}
			var ready []netip.Addr
			for _, e := range s.Endpoints {
				for _, a := range e.Addresses {
					host := zone.EndpointHostname(e, a, cfg.EndpointPodNames)
					ask(t, cfg, v, host+"."+base, dns.TypeA)
					ask(t, cfg, v, host+"."+base, dns.TypeSRV)
					askPTR(t, cfg, v, a)
					if e.Ready {
						ready = append(ready, a)
					}
				}
			}
			for _, p := range s.Ports {
				ask(t, cfg, v, "_"+p.Name+"._"+p.Protocol+"."+base, dns.TypeSRV)
			}

			// A well-named headless service answers its ready addresses,
			// and each has a PTR.
			if !headless || !isDNSLabel(service.Name) || !isDNSLabel(ns) || (hasZone(ready) && !checkZonedIPs) {
				continue
			}
			want4, want6 := addrsOf(ready)
			got4, _ := answers(ask(t, cfg, v, base, dns.TypeA))
			_, got6 := answers(ask(t, cfg, v, base, dns.TypeAAAA))
			if !slices.Equal(got4, want4) || !slices.Equal(got6, want6) {
				t.Fatalf("%s answers %v %v, want the ready addresses %v %v", base, got4, got6, want4, want6)
			}
			for _, a := range ready {
				if r := ask(t, cfg, v, zone.ReverseName(a), dns.TypePTR); len(r.Answer) == 0 {
					t.Fatalf("ready address %v of %s has no PTR: rcode %s", a, base, dns.RcodeToString[r.Rcode])
				}
			}
		}
	})
}
