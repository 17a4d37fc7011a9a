package gateway

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/zone"
)

// The resource kinds a zone answers from, as k8s_gateway's `resources`
// names them.
const (
	KindHTTPRoute = "HTTPRoute"
	KindTLSRoute  = "TLSRoute"
	KindGRPCRoute = "GRPCRoute"
	KindIngress   = "Ingress"
	KindService   = "Service"
)

// DefaultResources are every kind, in k8s_gateway's order: a name that
// several kinds give addresses to answers those of the first.
var DefaultResources = []string{KindHTTPRoute, KindTLSRoute, KindGRPCRoute, KindIngress, KindService}

// The SOA of a zone, as k8s_gateway writes it: its TTL and minimum are
// fixed (the ttl option sets the address records only), its hostmaster
// is hostmaster.<apex>.<zone>.
const (
	soaTTL     = 60
	soaRefresh = 7200
	soaRetry   = 1800
	soaExpire  = 86400
	hostmaster = "hostmaster"
)

// Settings are what shapes every zone's records: the gateway section of
// the configuration.
type Settings struct {
	Resources []string // kinds answered from, first first; empty: DefaultResources
	TTL       uint32   // of the address records
	Apex      string   // relative name of this server: the NS and SOA MNAME are <apex>.<zone>
	Secondary string   // relative name of a peer server, a second NS; "" for none
}

// Objects are the slim objects the records are built from, as the
// informers hold them.
type Objects struct {
	Gateways []Gateway
	Routes   []Route
	Ingress  []Ingress
	Services []Service
}

// Build returns the zone origin serves: SOA and NS at the apex, then
// A/AAAA records of every name in it, sorted. serial is the SOA's.
func Build(s Settings, origin string, serial uint32, objs *Objects) (*zone.FileZone, error) {
	origin = zone.Fqdn(origin)
	ns1 := zone.Fqdn(s.Apex + "." + origin)
	records := []dns.RR{&dns.SOA{
		Hdr: dns.RR_Header{Name: origin, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: soaTTL},
		Ns:  ns1, Mbox: zone.Fqdn(hostmaster + "." + ns1), Serial: serial,
		Refresh: soaRefresh, Retry: soaRetry, Expire: soaExpire, Minttl: soaTTL,
	}, &dns.NS{Hdr: dns.RR_Header{Name: origin, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: soaTTL}, Ns: ns1}}
	if s.Secondary != "" {
		records = append(records, &dns.NS{Hdr: dns.RR_Header{Name: origin, Rrtype: dns.TypeNS, Class: dns.ClassINET, Ttl: soaTTL},
			Ns: zone.Fqdn(s.Secondary + "." + origin)})
	}
	names := Names(s, origin, objs)
	owners := make([]string, 0, len(names))
	for n := range names {
		owners = append(owners, n)
	}
	slices.Sort(owners)
	for _, n := range owners {
		for _, a := range names[n] {
			hdr := dns.RR_Header{Name: n, Class: dns.ClassINET, Ttl: s.TTL}
			if a.Is4() {
				hdr.Rrtype = dns.TypeA
				records = append(records, &dns.A{Hdr: hdr, A: a.AsSlice()})
			} else {
				hdr.Rrtype = dns.TypeAAAA
				records = append(records, &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
			}
		}
	}
	return zone.NewFileZone(origin, "k8s_gateway", records, nil)
}

// Names returns the names of zone origin (fully qualified, lower-case)
// with their addresses, sorted and without duplicates. Each kind gives
// names to addresses; a name takes the addresses of the first kind of
// s.Resources that gives it any, as k8s_gateway looks the kinds up in
// turn and stops at the first with an answer.
func Names(s Settings, origin string, objs *Objects) map[string][]netip.Addr {
	origin = zone.Fqdn(origin)
	resources := s.Resources
	if len(resources) == 0 {
		resources = DefaultResources
	}
	gateways := make(map[string][]netip.Addr, len(objs.Gateways))
	for _, g := range objs.Gateways {
		gateways[g.Namespace+"/"+g.Name] = g.Addrs
	}
	out := map[string][]netip.Addr{}
	for _, kind := range resources {
		found := map[string][]netip.Addr{}
		add := func(name string, addrs []netip.Addr) {
			if name != "" && len(addrs) > 0 {
				found[name] = append(found[name], addrs...)
			}
		}
		switch kind {
		case KindHTTPRoute, KindTLSRoute, KindGRPCRoute:
			for _, r := range objs.Routes {
				if r.Kind != kind {
					continue
				}
				addrs := r.gatewayAddrs(gateways)
				for _, h := range r.Hostnames {
					add(inZone(h, origin), addrs)
				}
			}
		case KindIngress:
			for _, in := range objs.Ingress {
				for _, h := range in.Hosts {
					add(inZone(h, origin), in.Addrs)
				}
			}
		case KindService:
			for _, svc := range objs.Services {
				add(svc.name(origin), svc.Addrs)
			}
		}
		for name, addrs := range found {
			if _, taken := out[name]; !taken {
				out[name] = uniqueSorted(addrs)
			}
		}
	}
	return out
}

// inZone returns host as a fully qualified name when it lies in origin
// (the apex included), else "". A wildcard host "*.x.<origin>" stays one:
// the zone answers every name below x.<origin> that has no record of its
// own (RFC 4592), as the Gateway API means the hostname.
func inZone(host, origin string) string {
	if host == "" {
		return ""
	}
	name := zone.Fqdn(host)
	if _, ok := dns.IsDomainName(name); !ok || !zone.InZone(name, origin) {
		return ""
	}
	if strings.Contains(name[min(2, len(name)):], "*") || (strings.HasPrefix(name, "*") && !strings.HasPrefix(name, "*.")) {
		return "" // only a leading "*" label is a wildcard
	}
	return name
}

// uniqueSorted sorts addrs and drops repeats.
func uniqueSorted(addrs []netip.Addr) []netip.Addr {
	out := slices.Clone(addrs)
	slices.SortFunc(out, func(a, b netip.Addr) int { return a.Compare(b) })
	return slices.Compact(out)
}
