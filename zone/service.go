package zone

import (
	"encoding/binary"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"unsafe"

	"github.com/shardns/shardns/model"
)

// A service zone (ns.svc.<origin>) is held in parts, one per service
// name: the part of db holds db.ns.svc…, its ports' SRV names and its
// endpoints' host names, with their records. Every name of a service zone
// below its apex ends in the service's label, and no record of one
// service refers to another's names, so the parts are independent. An
// EndpointSlice update changes one service's names: the zone actor builds
// that service's part again and shares every other part with the snapshot
// before (UpdateServiceZone), where building the namespace whole cost a
// millisecond and the best part of a megabyte of garbage for every
// endpoint change of a namespace of a hundred services.

// servicePart is the names of one service and their records, in two
// allocations. Every name of a part ends in its base (label.<zone key>),
// and so do the targets of its records but for an ExternalName's: a part
// holds each name as its labels before the base, and a target under the
// base the same way. At 20k services of 10 endpoints, full names were
// three quarters of the text a part kept (docs/performance.md, run 17).
type servicePart struct {
	// data is, in order: the records, encoded as node.go says; the text
	// of the names and refs; the names' index, sorted by their text
	// (partNameSize bytes each); the refs' index, by number (partRefSize
	// bytes each).
	data        []byte
	names, refs uint32 // where the names' and the refs' index begin in data
	// topo is the zones each endpoint address of a hinted headless
	// service is preferred for (topology.go); nil for any other.
	topo map[netip.Addr][]string
}

// partName is a name of a part, data[start:end] (its labels before the
// base, "" for the base itself), and where its records start in data.
type partName struct{ start, end, at uint32 }

// partRef is a name records point at, data[start:end]: its labels before
// the part's base, "" for the base, or a whole name (ending in a dot)
// outside it.
type partRef struct{ start, end uint32 }

// The sizes of an index entry in a part's data: little-endian uint32s.
const (
	partNameSize = 12
	partRefSize  = 8
)

func (p *servicePart) nameCount() int { return int(p.refs-p.names) / partNameSize }

func (p *servicePart) name(i int) partName {
	e := p.data[int(p.names)+i*partNameSize:]
	return partName{binary.LittleEndian.Uint32(e), binary.LittleEndian.Uint32(e[4:]), binary.LittleEndian.Uint32(e[8:])}
}

func (p *servicePart) refCount() int { return (len(p.data) - int(p.refs)) / partRefSize }

func (p *servicePart) ref(i int) partRef {
	e := p.data[int(p.refs)+i*partRefSize:]
	return partRef{binary.LittleEndian.Uint32(e), binary.LittleEndian.Uint32(e[4:])}
}

// text returns data[start:end] as a string sharing data's memory: nothing
// writes to a part once it is built.
func (p *servicePart) text(start, end uint32) string {
	if start == end {
		return ""
	}
	return unsafe.String(&p.data[start], end-start)
}

// find returns the records of the name whose labels before base are rel,
// if the part has it.
func (p *servicePart) find(rel, base string, ttl uint32) (records, bool) {
	n := p.nameCount()
	i := sort.Search(n, func(i int) bool {
		name := p.name(i)
		return p.text(name.start, name.end) >= rel
	})
	if i == n {
		return records{}, false
	}
	name := p.name(i)
	if p.text(name.start, name.end) != rel {
		return records{}, false
	}
	r := decodeRecords(p.data[name.at:], nil, ttl)
	r.part, r.base = p, base
	return r, true
}

// targets returns the names of the part's refs, made whole with base, the
// part's base: the text of those below it in one allocation.
func (p *servicePart) targets(base string) []string {
	size := 0
	for i := range p.refCount() {
		r := p.ref(i)
		if t := p.text(r.start, r.end); t != "" && !strings.HasSuffix(t, ".") {
			size += len(t) + 1 + len(base)
		}
	}
	var text []byte
	if size > 0 {
		text = make([]byte, 0, size) // never grown: the strings share it
	}
	out := make([]string, p.refCount())
	for i := range out {
		r := p.ref(i)
		switch t := p.text(r.start, r.end); {
		case t == "":
			out[i] = base
		case strings.HasSuffix(t, "."):
			out[i] = t
		default:
			start := len(text)
			text = append(append(append(text, t...), '.'), base...)
			out[i] = unsafe.String(&text[start], len(text)-start)
		}
	}
	return out
}

// relative returns name's labels before base: "" for base itself, and
// name unchanged (a whole name, ending in a dot) when it is not below
// base, or when what it adds to base ends in an empty label (a hostname
// "x." makes "x..<base>"): read back, a text ending in a dot is a whole
// name, and such a name stays what it was.
func relative(name, base string) string {
	if name == base {
		return ""
	}
	if rel, ok := strings.CutSuffix(name, base); ok && strings.HasSuffix(rel, ".") {
		if rel = rel[:len(rel)-1]; rel != "" && !strings.HasSuffix(rel, ".") {
			return rel
		}
	}
	return name
}

// ServiceSources is what the names of one service label are built from:
// the Services of that name (one, unless names differ in case only) and
// the EndpointSlices naming it, each in the order of their object names.
type ServiceSources struct {
	Services []*model.Service
	Slices   []*model.EndpointSlice
}

// entry is one (address or alias, port, target) that a name resolves to,
// the unit CoreDNS's kubernetes plugin calls a service record.
type entry struct {
	addr   netip.Addr
	port   int32 // -1 when the endpoint has no ports
	target string
}

// BuildServiceZone builds the snapshot of zone key (ns.svc.<origin>) from
// the services and endpoint slices of that namespace.
func BuildServiceZone(cfg *Config, key, origin string, serial uint32,
	services map[string]*model.Service, slices map[string]*model.EndpointSlice) *Snapshot {
	bySvc := make(map[string]ServiceSources, len(services))
	for _, name := range sortedKeys(services) {
		svc := services[name]
		label := strings.ToLower(svc.Name)
		src := bySvc[label]
		src.Services = append(src.Services, svc)
		bySvc[label] = src
	}
	for _, name := range sortedKeys(slices) {
		sl := slices[name]
		label := strings.ToLower(sl.ServiceName)
		if src, ok := bySvc[label]; ok {
			src.Slices = append(src.Slices, sl)
			bySvc[label] = src
		}
	}
	s := newServiceZone(cfg, key, origin, serial, make(map[string]*servicePart, len(bySvc)))
	s.buildParts(cfg, bySvc)
	return s
}

// UpdateServiceZone returns prev, a service zone's snapshot, at serial
// with the names of each service label in changed built again from its
// sources; a label with no Service in them has no names any more. Every
// other part is prev's, shared.
func UpdateServiceZone(cfg *Config, prev *Snapshot, serial uint32, changed map[string]ServiceSources) *Snapshot {
	s := newServiceZone(cfg, prev.Key, prev.Origin, serial, maps.Clone(prev.parts))
	if s.parts == nil {
		s.parts = make(map[string]*servicePart, len(changed))
	}
	s.buildParts(cfg, changed)
	return s
}

// IsServiceZone reports whether s is a service zone's snapshot, which
// UpdateServiceZone can start from.
func (s *Snapshot) IsServiceZone() bool { return s.parts != nil }

func newServiceZone(cfg *Config, key, origin string, serial uint32, parts map[string]*servicePart) *Snapshot {
	return &Snapshot{Key: key, Origin: origin, Serial: serial, soa: cfg.SOA(origin, serial), ttl: cfg.TTL, parts: parts}
}

// buildParts builds the part of each label of bySvc into s.parts, and
// removes the labels that have no names.
func (s *Snapshot) buildParts(cfg *Config, bySvc map[string]ServiceSources) {
	b := newBuilder()
	for label, src := range bySvc {
		var topo map[netip.Addr][]string
		for _, svc := range src.Services {
			s.addService(cfg, b, svc, src.Slices)
			if t := preferredZones(svc, src.Slices); t != nil {
				topo = t
			}
		}
		if p := b.finishPart(label + "." + s.Key); p != nil {
			p.topo = topo
			s.parts[label] = p
		} else {
			delete(s.parts, label)
		}
	}
}

// partOf returns the part that holds name, a name below the zone's apex
// (the part of its last label before the zone key), with name's labels
// before that part's base and the base, which name ends in.
func (s *Snapshot) partOf(name string) (p *servicePart, rel, base string) {
	rest, ok := strings.CutSuffix(name, s.Key)
	if !ok || !strings.HasSuffix(rest, ".") {
		return nil, "", ""
	}
	rest = rest[:len(rest)-1]
	dot := strings.LastIndexByte(rest, '.')
	if p = s.parts[rest[dot+1:]]; p == nil {
		return nil, "", ""
	}
	if dot >= 0 {
		if rel = rest[:dot]; rel == "" {
			return nil, "", "" // an empty label
		}
	}
	return p, rel, name[dot+1:]
}

func (s *Snapshot) addService(cfg *Config, b *builder, svc *model.Service, slices []*model.EndpointSlice) {
	base := b.name(strings.ToLower(svc.Name), ".", s.Key)
	if svc.Type == model.ServiceExternalName {
		target := Fqdn(svc.ExternalName)
		if _, err := netip.ParseAddr(strings.TrimSuffix(target, ".")); err == nil || target == base {
			return // CoreDNS serves no record for an IP or a self-loop
		}
		b.part = append(b.part, builtName{base, b.begin(cnameNode)})
		b.ref(target)
		return
	}
	if svc.Type == model.ServiceClusterIP && cfg.IgnoreEmptyService && !hasReadyEndpoint(slices) {
		return
	}
	var all []entry
	byPort := map[string][]entry{} // "_name._proto" → entries
	if svc.Type == model.ServiceClusterIP {
		for _, p := range svc.Ports {
			for _, ip := range svc.ClusterIPs {
				e := entry{addr: ip, port: p.Port, target: base}
				all = append(all, e)
				if p.Name != "" {
					k := portKey(p)
					byPort[k] = append(byPort[k], e)
				}
			}
		}
	}
	byHost := map[string][]entry{}
	var hosts []string // full names, in order
	for _, sl := range slices {
		ports := sl.Ports
		if len(ports) == 0 {
			ports = []model.Port{{Port: -1}}
		}
		for _, ep := range sl.Endpoints {
			if !ep.Ready {
				continue
			}
			for _, addr := range ep.Addresses {
				target := b.name(strings.ToLower(EndpointHostname(ep, addr, cfg.EndpointPodNames)), ".", base)
				if _, seen := byHost[target]; !seen {
					hosts = append(hosts, target)
				}
				for _, p := range ports {
					e := entry{addr: addr, port: p.Port, target: target}
					byHost[target] = append(byHost[target], e)
					if svc.Type != model.ServiceHeadless {
						continue
					}
					all = append(all, e)
					if p.Name != "" {
						k := portKey(p)
						byPort[k] = append(byPort[k], e)
					}
				}
			}
		}
	}
	b.addNode(base, all)
	for k, es := range byPort {
		// _port._proto.base; the forms without underscores are answered
		// from it (see underscoredPortName).
		b.addNode(b.name(k, ".", base), es)
	}
	for _, h := range hosts {
		b.addNode(h, byHost[h])
	}
}

func hasReadyEndpoint(slices []*model.EndpointSlice) bool {
	for _, sl := range slices {
		for _, ep := range sl.Endpoints {
			if ep.Ready && len(ep.Addresses) > 0 {
				return true
			}
		}
	}
	return false
}

func portKey(p model.Port) string {
	return "_" + strings.ToLower(p.Name) + "._" + strings.ToLower(p.Protocol)
}

// addNode encodes the A, AAAA and SRV answers of name and the additional
// records of its SRV answer from entries, into the part being built. A
// name with no entries does not exist (NXDOMAIN), as in CoreDNS.
func (b *builder) addNode(name string, es []entry) {
	if len(es) == 0 {
		return
	}
	sc := &b.scratch
	sc.v4, sc.v6, sc.srvs, sc.extras = sc.v4[:0], sc.v6[:0], sc.srvs[:0], sc.extras[:0]
	clear(sc.seenAddr)
	clear(sc.seenSRV)
	clear(sc.seenExtra)
	for _, e := range es {
		e.addr = e.addr.Unmap()
		if !sc.seenAddr[e.addr] {
			sc.seenAddr[e.addr] = true
			if e.addr.Is4() {
				sc.v4 = append(sc.v4, e.addr)
			} else {
				sc.v6 = append(sc.v6, e.addr)
			}
		}
		if e.port < 0 {
			continue
		}
		if k := (entry{port: e.port, target: e.target}); !sc.seenSRV[k] {
			sc.seenSRV[k] = true
			sc.srvs = append(sc.srvs, e)
		}
		if k := (entry{addr: e.addr, target: e.target}); !sc.seenExtra[k] {
			sc.seenExtra[k] = true
			sc.extras = append(sc.extras, e)
		}
	}
	// CoreDNS weighs each SRV as 100 divided among all entries of the
	// name, counted before duplicates are removed.
	weight := uint16(10000 / (100 * len(es)))
	if weight == 0 {
		weight = 1
	}
	at := b.addAddresses(sc.v4, sc.v6, len(sc.srvs), len(sc.extras))
	if len(sc.srvs) > 0 {
		b.uint16(weight)
	}
	for _, e := range sc.srvs {
		b.uint16(uint16(e.port))
		b.ref(e.target)
	}
	for _, e := range sc.extras {
		b.ref(e.target)
		b.data = appendAddr(append(b.data, byte(e.addr.BitLen()/8)), e.addr)
	}
	b.part = append(b.part, builtName{name, at})
}

// finishPart returns the part built since the last one, whose names all
// end in base, nil when it has no names, and starts the next. The part
// gets its records, the text of its names and their index in one
// allocation of its own, of exact size: a part lives until its service
// changes, and shares nothing with the parts built beside it, so a part
// built again frees the old one whole.
func (b *builder) finishPart(base string) *servicePart {
	names := b.part
	defer b.startPart()
	if len(names) == 0 {
		return nil
	}
	for i := range names {
		names[i].name = relative(names[i].name, base)
	}
	// A name written twice keeps its last records, as a map would.
	slices.SortStableFunc(names, func(x, y builtName) int { return strings.Compare(x.name, y.name) })
	kept := names[:0]
	for i, n := range names {
		if i+1 < len(names) && names[i+1].name == n.name {
			continue
		}
		kept = append(kept, n)
	}
	// Names and the targets of records are mostly the same strings:
	// their text is held once, after the records.
	at := b.scratch.moved
	size := len(b.data)
	hold := func(s string) {
		if _, ok := at[s]; !ok {
			at[s] = uint32(size)
			size += len(s)
		}
	}
	for _, n := range kept {
		hold(n.name)
	}
	for i, s := range b.refs {
		b.refs[i] = relative(s, base)
		hold(b.refs[i])
	}
	namesAt := size
	size += partNameSize*len(kept) + partRefSize*len(b.refs)
	data := make([]byte, size)
	copy(data, b.data)
	for s, start := range at {
		copy(data[start:], s)
	}
	p := &servicePart{data: data, names: uint32(namesAt), refs: uint32(namesAt + partNameSize*len(kept))}
	index := data[namesAt:namesAt]
	for _, n := range kept {
		start := at[n.name]
		index = binary.LittleEndian.AppendUint32(index, start)
		index = binary.LittleEndian.AppendUint32(index, start+uint32(len(n.name)))
		index = binary.LittleEndian.AppendUint32(index, n.at)
	}
	for _, s := range b.refs {
		start := at[s]
		index = binary.LittleEndian.AppendUint32(index, start)
		index = binary.LittleEndian.AppendUint32(index, start+uint32(len(s)))
	}
	return p
}

// startPart empties what finishPart takes, keeping the capacity.
func (b *builder) startPart() {
	b.part = b.part[:0]
	b.data = b.data[:0]
	b.refs = b.refs[:0]
	clear(b.refNums)
	clear(b.scratch.moved)
}
