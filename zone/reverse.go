package zone

import (
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/shardns/shardns/model"
)

// PTR is one reverse record that a source object contributes to a reverse
// zone: addr points back at Target. What else the record needs is the
// source object's: the namespace of the service pointed at (a record is
// answered while it is exposed) and whether the source is a Service (its
// cluster IP wins over endpoints), so a replica's tens of thousands of
// PTRs do not each carry them.
type PTR struct {
	Addr   netip.Addr
	Target string // fully qualified, lower-case
}

// PTRs returns the reverse records obj contributes, grouped by the zone key
// of their reverse zone. Namespaces and pods contribute none.
func PTRs(cfg *Config, obj any) map[string][]PTR {
	out := map[string][]PTR{}
	add := func(a netip.Addr, target string) {
		key := reverseKey(ReverseName(a))
		if key == "" {
			return
		}
		out[key] = append(out[key], PTR{Addr: a, Target: target})
	}
	switch o := obj.(type) {
	case *model.Service:
		if o.Type != model.ServiceClusterIP {
			break
		}
		target := strings.ToLower(o.Name+"."+o.Namespace) + ".svc." + cfg.Primary()
		for _, ip := range o.ClusterIPs {
			add(ip, target)
		}
	case *model.EndpointSlice:
		base := strings.ToLower(o.ServiceName+"."+o.Namespace) + ".svc." + cfg.Primary()
		for _, ep := range o.Endpoints {
			if !ep.Ready {
				continue
			}
			for _, a := range ep.Addresses {
				add(a, strings.ToLower(EndpointHostname(ep, a, cfg.EndpointPodNames))+"."+base)
			}
		}
	}
	return out
}

// ReverseName is the in-addr.arpa or ip6.arpa name of a.
func ReverseName(a netip.Addr) string {
	var buf [maxReverseName]byte
	return string(appendReverseName(buf[:0], a))
}

// maxReverseName is the length of an ip6.arpa name: 32 nibbles and their
// dots, then "ip6.arpa.".
const maxReverseName = 73

// appendReverseName appends the reverse name of a (as dns.ReverseAddr
// writes it: decimal octets, or lower-case nibbles) to out.
func appendReverseName(out []byte, a netip.Addr) []byte {
	a = a.Unmap()
	if a.Is4() {
		v := a.As4()
		for i := 3; i >= 0; i-- {
			out = strconv.AppendUint(out, uint64(v[i]), 10)
			out = append(out, '.')
		}
		return append(out, "in-addr.arpa."...)
	}
	const hex = "0123456789abcdef"
	v := a.As16()
	for i := 15; i >= 0; i-- {
		out = append(out, hex[v[i]&0xf], '.', hex[v[i]>>4], '.')
	}
	return append(out, "ip6.arpa."...)
}

// ReverseZoneKey is the /24 or /64 reverse zone key that a's PTR lies in.
func ReverseZoneKey(a netip.Addr) string { return reverseKey(ReverseName(a)) }

// BuildReverseZone builds the snapshot of a /24 or /64 reverse zone from the
// records its sources contribute. As in CoreDNS, a service's cluster IP
// answers alone; otherwise every endpoint with that address answers.
//
// The snapshot's PTRs are ptrs packed into its own blocks: the zone actor
// keeps them as its state from then on. The lists ptrs holds were made
// one per source object, among the lists of every other reverse zone;
// kept as they are, the lists of the zones a replica keeps hold the
// memory of the zones it hands over.
func BuildReverseZone(cfg *Config, key, origin string, serial uint32, ptrs map[model.Key][]PTR) *Snapshot {
	// One text block for the targets and the owner names: at most a name
	// for every record.
	total, textBytes := 0, 0
	for _, list := range ptrs {
		total += len(list)
		for i, p := range list {
			if i == 0 || p.Target != list[i-1].Target {
				textBytes += len(p.Target)
			}
			var buf [maxReverseName]byte
			textBytes += len(appendReverseName(buf[:0], p.Addr))
		}
	}
	b := newBuilder()
	b.text.reserve(textBytes)
	ptrs = packPTRs(b, ptrs, total)
	// A record points at target, in namespace.
	type record struct{ target, namespace string }
	type targets struct{ service, endpoints []record }
	byAddr := map[netip.Addr]*targets{}
	for _, src := range sortedObjectKeys(ptrs) {
		ns := strings.ToLower(src.Namespace)
		for _, p := range ptrs[src] {
			t := byAddr[p.Addr]
			if t == nil {
				t = &targets{}
				byAddr[p.Addr] = t
			}
			if src.Kind == model.KindService {
				t.service = append(t.service, record{p.Target, ns})
			} else {
				t.endpoints = append(t.endpoints, record{p.Target, ns})
			}
		}
	}
	s := &Snapshot{Key: key, Origin: origin, Serial: serial, nodes: make(map[string]uint32, len(byAddr)),
		soa: cfg.SOA(origin, serial), PTRs: ptrs}
	var unique []record
	seen := map[string]bool{}
	for a, t := range byAddr {
		list := t.endpoints
		if len(t.service) > 0 {
			list = t.service[:1]
		}
		unique = unique[:0]
		clear(seen)
		for _, p := range list {
			if !seen[p.target] {
				seen[p.target] = true
				unique = append(unique, p)
			}
		}
		at := b.begin(ptrNode)
		b.uvarint(len(unique))
		for _, p := range unique {
			b.ref(p.target)
			b.ref(p.namespace)
		}
		s.nodes[b.reverseName(a)] = at
	}
	b.finish(s, cfg.TTL)
	return s
}

// packPTRs copies the total lists of ptrs into one block, their targets
// into b's text block (a target repeated in a row is copied once).
func packPTRs(b *builder, ptrs map[model.Key][]PTR, total int) map[model.Key][]PTR {
	packed := make(map[model.Key][]PTR, len(ptrs))
	var list blocks[PTR]
	list.reserve(total)
	for src, from := range ptrs {
		to := list.take(len(from))
		for i, p := range from {
			if i > 0 && p.Target == from[i-1].Target {
				p.Target = to[i-1].Target
			} else {
				p.Target = b.name(p.Target)
			}
			to[i] = p
		}
		packed[src] = to
	}
	return packed
}

func sortedObjectKeys[V any](m map[model.Key]V) []model.Key {
	keys := make([]model.Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}
