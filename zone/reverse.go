package zone

import (
	"bytes"
	"encoding/binary"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/miekg/dns"

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
	// External says the record is k8s_external's, for a Service's
	// external IP (svc.ns.<first external zone>): answered only where the
	// kubernetes plugin's records do not answer (externalptr.go).
	External bool
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
		for _, p := range cfg.externalPTRs(o) {
			key := reverseKey(ReverseName(p.Addr))
			out[key] = append(out[key], p)
		}
		if o.Type != model.ServiceClusterIP {
			break
		}
		target := Join(strings.ToLower(o.Name+"."+o.Namespace)+".svc.", cfg.Primary())
		for _, ip := range o.ClusterIPs {
			add(ip, target)
		}
	case *model.EndpointSlice:
		base := Join(strings.ToLower(o.ServiceName+"."+o.Namespace)+".svc.", cfg.Primary())
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
	ptrExternal  = 1 << 3 // k8s_external's record (PTR.External)
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
		if p.External {
			flags |= ptrExternal
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

// each calls f with every PTR of l: its address, its target as two
// parts, first then rest, and whether it is external. first may be
// scratch memory, valid only during the call. each reports false when l
// is not a packed list; f has then seen the PTRs before the damage.
func (l PTRList) each(f func(a netip.Addr, first, rest string, external bool)) bool {
	r := ptrReader{list: l, ok: true}
	suffix := r.text()
	var scratch [maxDashed + 1]byte
	for r.ok && r.at < len(r.list) {
		at := r.at
		if a, first, rest := r.next(suffix, &scratch); r.ok {
			f(a, first, rest, l[at]&ptrExternal != 0)
		}
	}
	return r.ok
}

// externalAt reports whether the PTR at offset at of l (see eachAt) is
// k8s_external's.
func (l PTRList) externalAt(at int) bool { return at < len(l) && l[at]&ptrExternal != 0 }

// eachAt calls f with the offset and address of every PTR of l, up to
// any damage; targetAt reads the PTR at such an offset.
func (l PTRList) eachAt(f func(at int, a netip.Addr)) {
	r := ptrReader{list: l, ok: true}
	suffix := r.text()
	var scratch [maxDashed + 1]byte
	for r.ok && r.at < len(r.list) {
		at := r.at
		if a, _, _ := r.next(suffix, &scratch); r.ok {
			f(at, a)
		}
	}
}

// targetAt returns the target of the PTR at offset at of l (see eachAt).
func (l PTRList) targetAt(at int) (string, bool) {
	r := ptrReader{list: l, ok: true}
	suffix := r.text()
	if !r.ok || at < r.at || at >= len(l) {
		return "", false
	}
	r.at = at
	var scratch [maxDashed + 1]byte
	_, first, rest := r.next(suffix, &scratch)
	if !r.ok {
		return "", false
	}
	return first + rest, true // a copy, when first is scratch
}

// next reads the PTR at r.at: its address and its target as first and
// rest; first may be in scratch.
func (r *ptrReader) next(suffix string, scratch *[maxDashed + 1]byte) (a netip.Addr, first, rest string) {
	flags := r.byte()
	a = r.addr(flags&ptrV6 != 0)
	switch flags & targetMask {
	case targetSuffix:
		return a, "", suffix
	case targetDashed:
		label := append(appendDashed(scratch[:0], a), '.')
		return a, unsafe.String(&label[0], len(label)), suffix
	case targetLabel:
		return a, r.text(), suffix
	default: // targetWhole
		return a, r.text(), ""
	}
}

// PTRs returns the PTRs of l, each target its own string.
func (l PTRList) PTRs() []PTR {
	var out []PTR
	l.each(func(a netip.Addr, first, rest string, external bool) {
		out = append(out, PTR{Addr: a, Target: first + rest, External: external})
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
//
// A reverse snapshot answers from those lists: it keeps no name, target or
// encoded record of its own, only an index of where each address's PTRs
// lie in them (reversePTR). With sharded watches a replica holds a share
// of every reverse zone of the cluster, thousands of zones of a few PTRs
// each, and the names and records a snapshot kept beside the lists were
// most of their memory.
func BuildReverseZone(cfg *Config, key, origin string, serial uint32, from map[model.Key]PTRList) *Snapshot {
	ptrs := packPTRLists(from, sortedObjectKeys(from))
	s := &Snapshot{Key: key, Origin: origin, Serial: serial, soa: cfg.SOA(origin, serial), PTRs: ptrs,
		reverse: true, ttl: cfg.TTL}
	n := 0 // counted first: the index is kept for as long as the snapshot
	for _, src := range ptrs {
		src.PTRs.eachAt(func(int, netip.Addr) { n++ })
	}
	index := make([]reversePTR, 0, n)
	for i, src := range ptrs {
		src.PTRs.eachAt(func(at int, _ netip.Addr) {
			index = append(index, reversePTR{source: uint32(i), at: uint32(at)})
		})
	}
	// Stable: an address's PTRs stay in the order of their sources, the
	// order they are answered in.
	slices.SortStableFunc(index, func(x, y reversePTR) int {
		ax, ay := s.ptrAddr(x), s.ptrAddr(y)
		return bytes.Compare(ax[:], ay[:])
	})
	s.ptrIndex = index
	var scratch []reverseTarget
	for i := 0; i < len(index); {
		j := i + 1
		for j < len(index) && s.ptrAddr(index[j]) == s.ptrAddr(index[i]) {
			j++
		}
		scratch = s.reverseTargets(index[i:j], scratch[:0])
		s.ptrRecords += len(scratch)
		i = j
	}
	return s
}

// reversePTR is where one PTR of a reverse snapshot lies: in the list of
// its source (an index into Snapshot.PTRs), at a byte offset, where its
// address is too. 8 bytes and no pointer, where a name and its encoded
// record took about 200, and the index with each address beside it 24.
type reversePTR struct {
	source uint32
	at     uint32
}

// ptrAddr returns the address of the PTR p, IPv4 as IPv4-mapped: in the
// list, a flags byte and the address's 4 or 16 bytes (see PTRList). The
// index holds only offsets eachAt read whole.
func (s *Snapshot) ptrAddr(p reversePTR) [16]byte {
	list := s.PTRs[p.source].PTRs[p.at:]
	var b [16]byte
	if list[0]&ptrV6 != 0 {
		copy(b[:], list[1:17])
		return b
	}
	copy(b[:4], list[1:5])
	return netip.AddrFrom4([4]byte(b[:4])).As16()
}

// reversePTRs returns the index entries of name's address, or none when
// name is not the reverse name of an address (as ReverseName writes it).
func (s *Snapshot) reversePTRs(name string) []reversePTR {
	a, ok := parseReverseName(name)
	if !ok {
		return nil
	}
	addr := a.As16()
	i := sort.Search(len(s.ptrIndex), func(i int) bool {
		at := s.ptrAddr(s.ptrIndex[i])
		return bytes.Compare(at[:], addr[:]) >= 0
	})
	j := i
	for j < len(s.ptrIndex) && s.ptrAddr(s.ptrIndex[j]) == addr {
		j++
	}
	return s.ptrIndex[i:j]
}

// reverseTarget is one PTR record of a reverse name: its target, the
// namespace of the service it points at, and whether it is
// k8s_external's.
type reverseTarget struct {
	target, namespace string
	external          bool
}

// reverseTargets appends to out the records of one address's PTRs: of the
// kubernetes plugin's, a service's cluster IP alone when a service has
// it, else every endpoint's; then k8s_external's, every service's; each
// target once.
func (s *Snapshot) reverseTargets(ptrs []reversePTR, out []reverseTarget) []reverseTarget {
	clusterIP := -1
	for i, p := range ptrs {
		src := s.PTRs[p.source]
		if src.Source.Kind == model.KindService && !src.PTRs.externalAt(int(p.at)) {
			clusterIP = i
			break
		}
	}
	start := len(out)
	for i, p := range ptrs {
		src := s.PTRs[p.source]
		external := src.PTRs.externalAt(int(p.at))
		if !external && clusterIP >= 0 && i != clusterIP {
			continue
		}
		target, ok := src.PTRs.targetAt(int(p.at))
		if !ok || slices.ContainsFunc(out[start:], func(r reverseTarget) bool {
			return r.target == target && r.external == external
		}) {
			continue
		}
		out = append(out, reverseTarget{target: target, namespace: strings.ToLower(src.Source.Namespace), external: external})
	}
	return out
}

// answerReverse answers a name of a reverse zone, reached by route.
// Records pointing into a namespace that is not exposed (deleted, or
// outside the namespace selector) are left out. The kubernetes plugin's
// records answer first; where it has none and lets the name fall through
// (or does not serve the zone), k8s_external answers (externalptr.go).
func (s *Snapshot) answerReverse(cfg *Config, v Reader, route Route, q Question) Response {
	dir := v.Directory()
	var found [4]reverseTarget
	var ans, external []dns.RR
	for _, r := range s.reverseTargets(s.reversePTRs(q.Name), found[:0]) {
		switch {
		case !dir.HasNamespace(r.namespace):
		case r.external:
			external = append(external, &dns.PTR{Hdr: hdr(q.Name, dns.TypePTR, cfg.External.TTL), Ptr: r.target})
		case !route.External:
			ans = append(ans, &dns.PTR{Hdr: hdr(q.Name, dns.TypePTR, s.ttl), Ptr: r.target})
		}
	}
	if len(ans) == 0 {
		if z := cfg.externalReverseZone(route, q.Name); z != "" {
			return answerExternalPTR(cfg, v, z, q, external)
		}
		return negative(dns.RcodeNameError, s.soa)
	}
	if q.Type != dns.TypePTR {
		return negative(dns.RcodeSuccess, s.soa)
	}
	return Response{Answer: ans}
}

// parseReverseName returns the address whose reverse name is name, as
// ReverseName writes it (decimal octets without leading zeros, or 32
// lower-case nibbles): the only name of the address a zone answers for.
func parseReverseName(name string) (netip.Addr, bool) {
	var a netip.Addr
	if rest, ok := strings.CutSuffix(name, ".in-addr.arpa."); ok {
		var v [4]byte
		for i := 3; i >= 0; i-- {
			label, tail, _ := strings.Cut(rest, ".")
			n, err := strconv.ParseUint(label, 10, 8)
			if err != nil {
				return netip.Addr{}, false
			}
			v[i], rest = byte(n), tail
		}
		if rest != "" {
			return netip.Addr{}, false
		}
		a = netip.AddrFrom4(v)
	} else if rest, ok := strings.CutSuffix(name, ".ip6.arpa."); ok {
		if len(rest) != 63 {
			return netip.Addr{}, false
		}
		var v [16]byte
		for i := range 32 {
			if i < 31 && rest[2*i+1] != '.' {
				return netip.Addr{}, false
			}
			nibble := strings.IndexByte("0123456789abcdef", rest[2*i])
			if nibble < 0 {
				return netip.Addr{}, false
			}
			// The first label is the last address's low nibble.
			v[15-i/2] |= byte(nibble) << (4 * (i % 2))
		}
		a = netip.AddrFrom16(v)
	} else {
		return netip.Addr{}, false
	}
	var buf [maxReverseName]byte
	if string(appendReverseName(buf[:0], a)) != name {
		return netip.Addr{}, false // leading zeros, or a "+1"
	}
	return a, true
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
