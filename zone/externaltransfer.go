package zone

import (
	"strings"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/model"
)

// A transfer of an external zone, as CoreDNS's k8s_external (with the
// transfer plugin) streams it: the SOA, the NS and its addresses, then
// each Service's records, then the SOA again. A namespace's records are
// held by its owners only, so a replica serving the transfer puts
// together the head and tail below and each namespace's part
// (ExternalTransferPart), every part from a replica that holds it.

// ExternalTransferHead is the start of a transfer of external zone z: its
// SOA, its NS, and the NS's addresses. The transfer ends with the SOA
// again (the head's first record).
func ExternalTransferHead(cfg *Config, dir *Directory, z string) []dns.RR {
	e := cfg.External
	if e == nil || dir.soa[z] == nil {
		return nil
	}
	ns := "ns1." + e.Apex + "." + z
	out := append([]dns.RR{}, dir.soa[z]...)
	out = append(out, &dns.NS{Hdr: hdr(z, dns.TypeNS, e.TTL), Ns: ns})
	return append(out, cfg.externalNSAddrs(ns, 0)...)
}

// ExternalTransferPart is what the Services of namespace ns, whose
// service zone s is, add to a transfer of external zone z, in CoreDNS's
// order: for each external IP and port of a Service, its address record
// (repeated per port, as CoreDNS repeats it), then the first SRV record
// of each owner name, <service> and _<port>._<proto>.<service>, weight
// 100, TTL the cluster's. Services without ports add nothing, nor do
// load balancer ingress hostnames and headless endpoints, which CoreDNS
// completes through upstream lookups and from a map of unstable order.
func (s *Snapshot) ExternalTransferPart(cfg *Config, z, ns string) []dns.RR {
	if cfg.External == nil || s == nil {
		return nil
	}
	var out []dns.RR
	for _, name := range sortedKeys(s.Services) {
		thawed, err := s.Services[name].Thaw(ns, name, "")
		svc, ok := thawed.(*model.Service)
		if err != nil || !ok {
			continue
		}
		out = append(out, externalServiceTransfer(cfg, svc, z)...)
	}
	return out
}

// externalServiceTransfer is one Service's part of a transfer.
func externalServiceTransfer(cfg *Config, svc *model.Service, z string) []dns.RR {
	base := strings.ToLower(svc.Name+"."+svc.Namespace) + "." + z
	seen := map[string]bool{}
	srv := func(owner string, port int32) []dns.RR {
		if seen[owner] {
			return nil
		}
		seen[owner] = true
		return []dns.RR{&dns.SRV{Hdr: hdr(owner, dns.TypeSRV, cfg.TTL), Weight: 100, Port: uint16(port), Target: base}}
	}
	var out []dns.RR
	for _, ip := range svc.ExternalIPs {
		for _, p := range svc.Ports {
			out = append(out, addrRR(base, ip.Unmap(), cfg.External.TTL))
			out = append(out, srv(base, p.Port)...)
			owner := "_" + strings.ToLower(p.Name) + "._" + strings.ToLower(p.Protocol) + "." + base
			out = append(out, srv(owner, p.Port)...)
		}
	}
	return out
}
