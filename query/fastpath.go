package query

import (
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"time"
	"unsafe"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/acl"
	"github.com/shardns/shardns/cache"
	"github.com/shardns/shardns/zone"
)

// The fast path answers the common question — one IN question, no
// compression in it, at most an OPT record — from packed answers reused
// per (name, type, size limit), without unpacking or packing anything:
// the ID, the RD and CD flags and the letter case of the question are
// patched into a copy. A packed answer is valid while the zone snapshot and
// the directory it was built from are the ones published: any update
// publishes new ones, and the next query rebuilds it. Anything unusual
// takes the full path.

// lbVariants is how many shuffles of a multi-address answer are kept when
// loadbalance is on; each query gets one of them at random.
const lbVariants = 8

// packedAnswer is one reusable response, with ID 0 and a lower-case
// question.
type packedAnswer struct {
	variants [][]byte
	snap     *zone.Snapshot
	dir      *zone.Directory
	rcode    int
	zone     string // metrics label
	// nodeZone is the zone the answer was ordered for: a node relabelled
	// into another zone orders its answers again.
	nodeZone string
	// An owner's cached answer (serveOwner) is valid while the cluster
	// cache holds src, and has the TTLs of each variant counted down.
	src  *cache.Entry
	ttls [][]ttlAt
}

// answerCache holds packed answers. It is bounded: when a shard is full,
// it is emptied (answers rebuild on the next query), which keeps the cost
// of a flood of distinct names at one rebuild each. 16 × 1024 entries
// hold the names a cluster asks repeatedly (the bench's mix of 1k
// services is under 10k) in about 6 MB; a flood of distinct names (the
// soak asks a new one every few milliseconds) grew the heap by 26 MB at
// the old bound of 16 × 4096 before it held.
type answerCache struct {
	shards [16]answerShard
}

type answerShard struct {
	mu sync.RWMutex
	m  map[string]*packedAnswer
}

const answerShardMax = 1024

func (c *answerCache) shard(key []byte) *answerShard {
	var h uint32 = 2166136261
	for _, b := range key {
		h = (h ^ uint32(b)) * 16777619
	}
	return &c.shards[h%uint32(len(c.shards))]
}

func (c *answerCache) get(key []byte) *packedAnswer {
	s := c.shard(key)
	s.mu.RLock()
	e := s.m[string(key)] // no allocation: the conversion is only for the lookup
	s.mu.RUnlock()
	return e
}

func (c *answerCache) put(key []byte, e *packedAnswer) {
	s := c.shard(key)
	s.mu.Lock()
	if s.m == nil || len(s.m) >= answerShardMax {
		s.m = make(map[string]*packedAnswer)
	}
	s.m[string(key)] = e
	s.mu.Unlock()
}

// wireQuestion is what the fast path reads of a request.
type wireQuestion struct {
	nameEnd int    // offset just past the question name
	qtype   uint16 // the question type
	opt     bool   // an OPT record follows the question
	udpSize uint16
}

// parseWire reads a request the fast path can answer; ok is false for
// anything else (the full path handles it, including every error). The
// lower-case question name is written to lname.
func parseWire(req []byte, lname []byte) (q wireQuestion, name []byte, ok bool) {
	if len(req) < headerSize+5 || req[2]&0xF8 != 0 || // QR, opcode
		binary.BigEndian.Uint16(req[4:]) != 1 || binary.BigEndian.Uint16(req[6:]) != 0 ||
		binary.BigEndian.Uint16(req[8:]) != 0 {
		return q, nil, false
	}
	arcount := binary.BigEndian.Uint16(req[10:])
	if arcount > 1 {
		return q, nil, false
	}
	i := headerSize
	name = lname[:0]
	for {
		if i >= len(req) {
			return q, nil, false
		}
		l := int(req[i])
		if l == 0 {
			i++
			break
		}
		if l > 63 || i+1+l >= len(req) || len(name)+l+1 > 254 {
			return q, nil, false // pointers, bad labels, too long
		}
		for _, c := range req[i+1 : i+1+l] {
			switch {
			case 'A' <= c && c <= 'Z':
				c += 'a' - 'A'
			case c == '.' || c == '\\' || c < '!' || c > '~':
				return q, nil, false // needs escaping: the full path
			}
			name = append(name, c)
		}
		name = append(name, '.')
		i += 1 + l
	}
	if len(name) == 0 {
		name = append(name, '.')
	}
	if i+4 > len(req) || binary.BigEndian.Uint16(req[i+2:]) != dns.ClassINET {
		return q, nil, false
	}
	q.nameEnd, q.qtype = i, binary.BigEndian.Uint16(req[i:])
	if q.qtype == dns.TypeAXFR || q.qtype == dns.TypeIXFR || q.qtype == dns.TypeOPT || q.qtype == dns.TypeANY {
		return q, nil, false
	}
	i += 4
	if arcount == 0 {
		return q, name, i == len(req)
	}
	// The OPT record: root name, type, payload size, version 0.
	if i+11 > len(req) || req[i] != 0 || binary.BigEndian.Uint16(req[i+1:]) != dns.TypeOPT || req[i+6] != 0 {
		return q, nil, false
	}
	rdlen := int(binary.BigEndian.Uint16(req[i+9:]))
	if i+11+rdlen != len(req) {
		return q, nil, false
	}
	if !plainOptions(req[i+11:]) {
		return q, nil, false
	}
	q.opt, q.udpSize = true, binary.BigEndian.Uint16(req[i+3:])
	return q, name, true
}

// plainOptions reports whether the OPT rdata rd is a well-framed list of
// options whose contents cannot be malformed (a cookie, an NSID request,
// padding, algorithm lists, codes this server does not know). Any other
// option, or a broken frame, takes the full path, which answers FORMERR to
// a request that does not unpack.
func plainOptions(rd []byte) bool {
	for len(rd) > 0 {
		if len(rd) < 4 {
			return false
		}
		code, n := binary.BigEndian.Uint16(rd), int(binary.BigEndian.Uint16(rd[2:]))
		if 4+n > len(rd) {
			return false
		}
		switch code {
		case dns.EDNS0LLQ, dns.EDNS0UL, dns.EDNS0SUBNET, dns.EDNS0EXPIRE, dns.EDNS0TCPKEEPALIVE,
			dns.EDNS0EDE, dns.EDNS0ESU, dns.EDNS0REPORTING, dns.EDNS0ZONEVERSION:
			return false // contents with a format of their own
		}
		rd = rd[4+n:]
	}
	return true
}

// sizeLimit is the largest response the client takes.
func sizeLimit(t Transport, q wireQuestion) uint16 {
	switch {
	case t.TCP:
		return dns.MaxMsgSize
	case q.opt:
		return uint16(min(max(int(q.udpSize), dns.MinMsgSize), MaxUDPSize))
	}
	return dns.MinMsgSize
}

// serveFast answers req from a packed answer, building it when missing or
// stale. ok is false when the request needs the full path.
func (h *Handler) serveFast(req []byte, t Transport, out []byte) (resp []byte, ok bool) {
	if h.Autopath != nil || h.IPv4Clients != nil || h.QueryLog != nil || h.Modify != nil {
		return nil, false
	}
	var start time.Time
	if h.Metrics != nil && h.timed.Add(1)%durationSampling == 0 {
		start = time.Now()
	}
	sc := scratchPool.Get().(*scratch)
	defer scratchPool.Put(sc)
	q, lname, ok := parseWire(req, sc.name[:0])
	if !ok {
		return nil, false
	}
	name := unsafe.String(unsafe.SliceData(lname), len(lname))
	if h.ACL != nil {
		if a, _ := h.ACL.Check(name, q.qtype, t.Client.Addr()); a > acl.Allow {
			return nil, false // refused, filtered or dropped: the full path says so
		}
	}
	if h.Rewrite != nil || h.Template != nil || h.Hosts != nil || h.Federation != nil {
		if h.Template != nil && (h.Rewrite == nil || !h.Rewrite.Matches(name, q.qtype)) {
			if rcode, match, ok := h.Template.Bare(name, dns.ClassINET, q.qtype); ok {
				h.countBare(match)
				return h.serveBare(req, q, t, rcode, out, start), true
			}
		}
		if h.planeClaims(name, q.qtype) {
			return nil, false
		}
	}
	route := h.Config.Domains.Route(name)
	var snap *zone.Snapshot
	switch route.Kind {
	case zone.RouteExternal:
		// A file zone held here is answered like a cluster zone; mesh
		// names and names to forward take the full path.
		key := h.Config.FileOrigin(h.Zones.Directory(), name)
		if key == "" {
			return nil, false
		}
		if snap = h.Zones.Zone(key); snap == nil {
			return nil, false
		}
		route.Origin = key // the metrics label
	case zone.RouteZone:
		if snap = h.Zones.Zone(route.Key); snap == nil {
			// Held elsewhere: an owner's answer the cluster cache holds,
			// or the full path.
			return h.serveOwner(req, q, lname, name, t, out, start)
		}
	}
	dir := h.Zones.Directory()
	limit := sizeLimit(t, q)
	key := append(lname, byte(q.qtype>>8), byte(q.qtype), byte(limit>>8), byte(limit), boolByte(q.opt))
	e := h.answers.get(key)
	if e == nil || e.snap != snap || e.dir != dir || e.nodeZone != h.Config.NodeZone() {
		if e = h.buildPacked(name, q, limit, snap, dir, route.Origin); e == nil {
			return nil, false
		}
		h.answers.put(key, e)
	}
	wire := e.variants[0]
	if len(e.variants) > 1 {
		wire = e.variants[rand.IntN(len(e.variants))]
	}
	out = append(out[:0], wire...)
	copy(out[0:2], req[0:2])                                   // ID
	out[2] = out[2]&^0x01 | req[2]&0x01                        // RD
	out[3] = out[3]&^0x10 | req[3]&0x10                        // CD
	copy(out[headerSize:q.nameEnd], req[headerSize:q.nameEnd]) // the question as asked
	h.observeFast(e, t, q.qtype, len(req), len(out), start)
	return out, true
}

// serveBare writes the answer of a template that makes no record: the
// request's header and question with QR, AA and rcode set (RD and CD as
// asked), and an OPT record when the request had one, as the full path
// packs it.
func (h *Handler) serveBare(req []byte, q wireQuestion, t Transport, rcode int, out []byte, start time.Time) []byte {
	out = append(out[:0], req[:q.nameEnd+4]...)
	out[2] = 0x80 | 0x04 | req[2]&0x01 // QR, AA, RD
	out[3] = req[3]&0x10 | byte(rcode) // CD
	clear(out[6:headerSize])           // no answer, authority or additional yet
	if q.opt {
		out[11] = 1
		// Root name, type OPT, our buffer size, extended rcode, version
		// and flags 0, no options.
		out = append(out, 0, 0, byte(dns.TypeOPT), MaxUDPSize>>8, MaxUDPSize&0xFF, 0, 0, 0, 0, 0, 0)
	}
	h.observeFast(&packedAnswer{rcode: rcode, zone: "."}, t, q.qtype, len(req), len(out), start)
	return out
}

// scratch is per-request working memory of the fast path, pooled so a
// request allocates nothing.
type scratch struct{ name [256 + 8]byte }

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// buildPacked answers the lower-case question through the full path's
// code and packs the reusable response; nil when the answer must not be
// reused (forwarded, held elsewhere, fallthrough).
func (h *Handler) buildPacked(name string, q wireQuestion, limit uint16, snap *zone.Snapshot, dir *zone.Directory, origin string) *packedAnswer {
	name = string([]byte(name)) // the entry outlives the request's buffer
	resp := zone.Answer(h.Config, h.Zones, zone.Question{Name: name, Type: q.qtype})
	if resp.External || len(resp.Remote) > 0 || resp.Rcode == dns.RcodeServerFailure ||
		(resp.Rcode == dns.RcodeNameError && h.fallsThrough(name)) ||
		h.Config.ExternalChases(name, q.qtype, resp.Answer) { // completed by upstream lookups
		return nil
	}
	req := new(dns.Msg)
	req.SetQuestion(name, q.qtype)
	req.RecursionDesired = false
	t := Transport{TCP: limit == dns.MaxMsgSize}
	if q.opt {
		req.SetEdns0(limit, false)
	}
	e := &packedAnswer{snap: snap, dir: dir, rcode: resp.Rcode, zone: origin, nodeZone: h.Config.NodeZone()}
	variants := 1
	if h.LoadBalance && addressCount(resp.Answer) > 1 {
		variants = lbVariants
	}
	for range variants {
		x := &exchange{req: req, t: t, opt: req.IsEdns0()}
		r := new(dns.Msg)
		r.SetReply(req)
		h.setAnswer(x, r, name, name, resp)
		b, err := h.packMsg(x, r, nil)
		if err != nil {
			return nil
		}
		e.variants = append(e.variants, b)
	}
	return e
}

func addressCount(rrs []dns.RR) int {
	n := 0
	for _, rr := range rrs {
		if t := rr.Header().Rrtype; t == dns.TypeA || t == dns.TypeAAAA {
			n++
		}
	}
	return n
}
