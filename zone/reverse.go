package zone

import (
	"encoding/binary"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"unsafe"

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

// PTRSource is the PTRs one source object contributes to a reverse zone.
// A reverse zone's snapshot keeps them sorted by source, in a slice: most
// of a replica's reverse zones have a few sources each, and a map of them
// took 500 bytes a zone where the slice takes 56 bytes a source.
type PTRSource struct {
	Source model.Key
	PTRs   PTRList
}

// PTRList is the PTRs one source object contributes to a reverse zone,
// packed into bytes: the targets' common suffix once, then for each PTR a
// flags byte, its address in 4 or 16 bytes and what its target adds to
// the suffix: nothing, its first label (as written, or made from the
// address with dashes, as an endpoint without a hostname is named), or
// the whole target when it shares no suffix. About 6 bytes a PTR where a
// PTR value takes 40, and a replica keeps one for every address of its
// namespaces' endpoints, to build a zone again when one source changes.
type PTRList string

// The flags byte of a packed PTR: its address's length, and which form
// its target takes.
const (
	ptrV6        = 1 << 0
	targetMask   = 3 << 1
	targetSuffix = 0 << 1 // the suffix alone
	targetDashed = 1 << 1 // the address with dashes, a dot, the suffix
	targetLabel  = 2 << 1 // a label (with its dot) follows; then the suffix
	targetWhole  = 3 << 1 // the whole target follows
)

// PackPTRs packs ptrs; see PTRList.
func PackPTRs(ptrs []PTR) PTRList {
	if len(ptrs) == 0 {
		return ""
	}
	suffix := ptrs[0].Target
	for _, p := range ptrs[1:] {
		if p.Target != suffix {
			if _, rest, ok := strings.Cut(ptrs[0].Target, "."); ok {
				suffix = rest
			}
			break
		}
	}
	out := binary.AppendUvarint(make([]byte, 0, len(suffix)+8*len(ptrs)), uint64(len(suffix)))
	out = append(out, suffix...)
	var dashed [maxDashed + 1]byte
	for _, p := range ptrs {
		flags, extra := byte(targetWhole), p.Target
		label, hasSuffix := strings.CutSuffix(p.Target, suffix)
		switch {
		case p.Target == suffix:
			flags, extra = targetSuffix, ""
		case hasSuffix && label == string(append(appendDashed(dashed[:0], p.Addr), '.')):
			flags, extra = targetDashed, ""
		case hasSuffix && strings.HasSuffix(label, "."):
			flags, extra = targetLabel, label
		}
		if !p.Addr.Is4() {
			flags |= ptrV6
		}
		out = append(out, flags)
		if p.Addr.Is4() {
			a := p.Addr.As4()
			out = append(out, a[:]...)
		} else {
			a := p.Addr.As16()
			out = append(out, a[:]...)
		}
		if flags&targetMask == targetLabel || flags&targetMask == targetWhole {
			out = binary.AppendUvarint(out, uint64(len(extra)))
			out = append(out, extra...)
		}
	}
	return PTRList(out)
}

// maxDashed is room for the longest address text (an IPv4-mapped IPv6
// address written in full); a longer one, with a scope zone, is still
// written, in memory of its own.
const maxDashed = 45

// appendDashed appends a with dashes for its dots or colons, the label an
// endpoint without a hostname is named by (EndpointHostname).
func appendDashed(out []byte, a netip.Addr) []byte {
	start := len(out)
	out = a.AppendTo(out)
	for i := start; i < len(out); i++ {
		if out[i] == '.' || out[i] == ':' {
			out[i] = '-'
		}
	}
	return out
}

// each calls f with every PTR of l: its address and its target as two
// parts, first then rest. first may be scratch memory, valid only during
// the call. each reports false when l is not a packed list; f has then
// seen the PTRs before the damage.
func (l PTRList) each(f func(a netip.Addr, first, rest string)) bool {
	r := ptrReader{list: l, ok: true}
	suffix := r.text()
	var scratch [maxDashed + 1]byte
	for r.ok && r.at < len(r.list) {
		flags := r.byte()
		a := r.addr(flags&ptrV6 != 0)
		switch flags & targetMask {
		case targetSuffix:
			if r.ok {
				f(a, "", suffix)
			}
		case targetDashed:
			if r.ok {
				label := append(appendDashed(scratch[:0], a), '.')
				f(a, unsafe.String(&label[0], len(label)), suffix)
			}
		case targetLabel:
			if label := r.text(); r.ok {
				f(a, label, suffix)
			}
		case targetWhole:
			if target := r.text(); r.ok {
				f(a, target, "")
			}
		}
	}
	return r.ok
}

// PTRs returns the PTRs of l, each target its own string.
func (l PTRList) PTRs() []PTR {
	var out []PTR
	l.each(func(a netip.Addr, first, rest string) {
		out = append(out, PTR{Addr: a, Target: first + rest})
	})
	return out
}

// ptrReader reads a PTRList; ok turns false at the first byte missing.
type ptrReader struct {
	list PTRList
	at   int
	ok   bool
}

func (r *ptrReader) byte() byte {
	if !r.ok || r.at >= len(r.list) {
		r.ok = false
		return 0
	}
	r.at++
	return r.list[r.at-1]
}

func (r *ptrReader) addr(v6 bool) netip.Addr {
	n := 4
	if v6 {
		n = 16
	}
	if !r.ok || len(r.list)-r.at < n {
		r.ok = false
		return netip.Addr{}
	}
	var b [16]byte
	copy(b[:], r.list[r.at:r.at+n])
	r.at += n
	if v6 {
		return netip.AddrFrom16(b)
	}
	return netip.AddrFrom4([4]byte(b[:4]))
}

// text reads a length and that many bytes.
func (r *ptrReader) text() string {
	var n uint64
	for shift := 0; ; shift += 7 {
		c := r.byte()
		if !r.ok || shift > 28 {
			r.ok = false
			return ""
		}
		n |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	if n > uint64(len(r.list)-r.at) {
		r.ok = false
		return ""
	}
	r.at += int(n)
	return string(r.list[r.at-int(n) : r.at])
}

// BuildReverseZone builds the snapshot of a /24 or /64 reverse zone from the
// records its sources contribute. As in CoreDNS, a service's cluster IP
// answers alone; otherwise every endpoint with that address answers.
//
// The snapshot's PTRs are ptrs copied into one block of its own: the zone
// actor keeps them as its state from then on. The lists ptrs holds were
// made one per source object, among the lists of every other reverse
// zone; kept as they are, the lists of the zones a replica keeps hold the
// memory of the zones it hands over.
func BuildReverseZone(cfg *Config, key, origin string, serial uint32, from map[model.Key]PTRList) *Snapshot {
	b := newBuilder()
	ptrs := packPTRLists(from, sortedObjectKeys(from))
	// One text block for the targets and the owner names: at most a name
	// for every record.
	textBytes := 0
	var previous []byte
	for _, src := range ptrs {
		previous = previous[:0]
		src.PTRs.each(func(a netip.Addr, first, rest string) {
			if !sameTarget(previous, first, rest) {
				textBytes += len(first) + len(rest)
				previous = append(append(previous[:0], first...), rest...)
			}
			var buf [maxReverseName]byte
			textBytes += len(appendReverseName(buf[:0], a))
		})
	}
	b.text.reserve(textBytes)
	// A record points at target, in namespace.
	type record struct{ target, namespace string }
	type targets struct{ service, endpoints []record }
	byAddr := map[netip.Addr]*targets{}
	for _, src := range ptrs {
		ns := strings.ToLower(src.Source.Namespace)
		previous := "" // a target repeated in a row is copied once
		src.PTRs.each(func(a netip.Addr, first, rest string) {
			target := previous
			if !sameTarget(previous, first, rest) {
				target = b.name(first, rest)
				previous = target
			}
			t := byAddr[a]
			if t == nil {
				t = &targets{}
				byAddr[a] = t
			}
			if src.Source.Kind == model.KindService {
				t.service = append(t.service, record{target, ns})
			} else {
				t.endpoints = append(t.endpoints, record{target, ns})
			}
		})
	}
	s := &Snapshot{Key: key, Origin: origin, Serial: serial, nodes: make(map[string]uint32, len(byAddr)),
		soa: cfg.SOA(origin, serial), PTRs: ptrs, reverse: true}
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

// sameTarget reports whether target is first followed by rest.
func sameTarget[T string | []byte](target T, first, rest string) bool {
	n := len(first)
	return len(target) == n+len(rest) && string(target[:n]) == first && string(target[n:]) == rest
}

// packPTRLists copies the lists of ptrs, whose keys are sources, into
// one string.
func packPTRLists(ptrs map[model.Key]PTRList, sources []model.Key) []PTRSource {
	var all strings.Builder
	total := 0
	for _, list := range ptrs {
		total += len(list)
	}
	all.Grow(total)
	for _, src := range sources {
		all.WriteString(string(ptrs[src]))
	}
	block := all.String()
	packed := make([]PTRSource, len(sources))
	for i, src := range sources {
		n := len(ptrs[src])
		packed[i], block = PTRSource{Source: src, PTRs: PTRList(block[:n])}, block[n:]
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
