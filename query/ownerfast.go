package query

import (
	"encoding/binary"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/cache"
	"github.com/shardns/shardns/zone"
)

// Owners' answers that the cluster cache holds (every cluster name of a
// node-local process, the names a replica asks other replicas about) take
// a fast path of their own: the response is packed once per cache entry
// and question shape, and each hit copies it, patches the ID, the flags
// and the question case as the replica's fast path does, and writes the
// TTLs counted down from the entry's age, as the cache's copies carry
// them. A new entry (a refresh after expiry) packs again. Whether the
// name is asked of owners is decided by the same zone.Answer the full
// path calls; anything but a fresh hit the full path would serve as it
// is (a miss, an NXDOMAIN that falls through to the forwarder) goes to
// the full path.

// ttlAt is where a record's TTL sits in a packed response, and its value
// as the owner sent it.
type ttlAt struct {
	off int
	ttl uint32
}

// serveOwner answers the lower-case question name of req from the
// cluster cache; ok is false when the full path must answer.
func (h *Handler) serveOwner(req []byte, q wireQuestion, lname []byte, name string, t Transport, out []byte, start time.Time) ([]byte, bool) {
	c := h.Cluster
	if c == nil || c.Cache == nil {
		return nil, false
	}
	ck := cache.Key{Name: name, Type: q.qtype, Class: dns.ClassINET}
	hit, st, _ := c.Cache.Peek(ck, c.Now())
	if st != cache.Fresh {
		return nil, false
	}
	resp := zone.Answer(h.Config, h.Zones, zone.Question{Name: name, Type: q.qtype})
	if len(resp.Remote) == 0 && !resp.Wait {
		return nil, false // answered here, or SERVFAIL: the full path says so
	}
	if !c.current(ck, hit, resp.Zone) {
		return nil, false // an owner said it changed: the full path asks again
	}
	if m := hit.Entry.Msg(); m.Rcode == dns.RcodeNameError && h.fallsThrough(name) ||
		h.Config.ExternalChases(name, q.qtype, m.Answer) { // completed by upstream lookups
		return nil, false
	}
	c.count("hit")
	dir := h.Zones.Directory()
	limit := sizeLimit(t, q)
	key := append(lname, byte(q.qtype>>8), byte(q.qtype), byte(limit>>8), byte(limit), boolByte(q.opt))
	e := h.owned.get(key)
	if e == nil || e.src != hit.Entry || e.dir != dir {
		if e = h.packOwned(name, q, limit, hit.Entry, dir); e == nil {
			return nil, false
		}
		h.owned.put(key, e)
	}
	i := 0
	if len(e.variants) > 1 {
		i = rand.IntN(len(e.variants))
	}
	out = append(out[:0], e.variants[i]...)
	copy(out[0:2], req[0:2])                                   // ID
	out[2] = out[2]&^0x01 | req[2]&0x01                        // RD
	out[3] = out[3]&^0x10 | req[3]&0x10                        // CD
	copy(out[headerSize:q.nameEnd], req[headerSize:q.nameEnd]) // the question as asked
	for _, f := range e.ttls[i] {
		binary.BigEndian.PutUint32(out[f.off:], cache.CountDown(f.ttl, hit.Age, hit.Remaining))
	}
	h.observeFast(e, t, q.qtype, len(req), len(out), start)
	return out, true
}

// packOwned packs the cached owner's answer src for the lower-case
// question through the full path's code (packOwner's), with the TTLs as
// the owner sent them, and finds where they are; nil when the packed
// response cannot be walked.
func (h *Handler) packOwned(name string, q wireQuestion, limit uint16, src *cache.Entry, dir *zone.Directory) *packedAnswer {
	name = strings.Clone(name) // the entry outlives the request's buffer
	req := new(dns.Msg)
	req.SetQuestion(name, q.qtype)
	req.RecursionDesired = false
	if q.opt {
		req.SetEdns0(limit, false)
	}
	m := src.Msg()
	e := &packedAnswer{src: src, dir: dir, rcode: m.Rcode}
	variants := 1
	if h.LoadBalance && addressCount(m.Answer) > 1 {
		variants = lbVariants
	}
	for range variants {
		x := &exchange{req: req, t: Transport{TCP: limit == dns.MaxMsgSize}, opt: req.IsEdns0()}
		r := new(dns.Msg)
		r.SetReply(req)
		h.setAnswer(x, r, name, name, ownerResponse(m, src.Preferred()))
		e.zone = x.zone
		b, err := h.packMsg(x, r, nil)
		if err != nil {
			return nil
		}
		ttls, ok := ttlOffsets(b)
		if !ok {
			return nil
		}
		e.variants = append(e.variants, b)
		e.ttls = append(e.ttls, ttls)
	}
	return e
}

// ownerResponse is an owner's (or cached) answer m as the response to
// answer with.
func ownerResponse(m *dns.Msg, preferred int) zone.Response {
	return zone.Response{Rcode: m.Rcode, Answer: m.Answer, Ns: m.Ns, Extra: m.Extra, Preferred: preferred,
		Referral: !m.Authoritative} // an owner's referral comes without AA
}

// ttlOffsets walks the packed message b and returns where the TTL of each
// record is, with its value; the OPT record's TTL field holds flags and is
// left out. ok is false when b does not parse.
func ttlOffsets(b []byte) (ttls []ttlAt, ok bool) {
	if len(b) < headerSize {
		return nil, false
	}
	i := headerSize
	for range binary.BigEndian.Uint16(b[4:]) {
		if i, ok = skipName(b, i); !ok || i+4 > len(b) {
			return nil, false
		}
		i += 4
	}
	records := int(binary.BigEndian.Uint16(b[6:])) + int(binary.BigEndian.Uint16(b[8:])) +
		int(binary.BigEndian.Uint16(b[10:]))
	for range records {
		if i, ok = skipName(b, i); !ok || i+10 > len(b) {
			return nil, false
		}
		if binary.BigEndian.Uint16(b[i:]) != dns.TypeOPT {
			ttls = append(ttls, ttlAt{off: i + 4, ttl: binary.BigEndian.Uint32(b[i+4:])})
		}
		i += 10 + int(binary.BigEndian.Uint16(b[i+8:]))
	}
	return ttls, i == len(b)
}

// skipName returns the offset just past the (possibly compressed) name at
// b[i:].
func skipName(b []byte, i int) (int, bool) {
	for i < len(b) {
		switch l := b[i]; {
		case l == 0:
			return i + 1, true
		case l&0xC0 == 0xC0:
			return i + 2, i+2 <= len(b)
		case l&0xC0 != 0:
			return 0, false
		default:
			i += 1 + int(l)
		}
	}
	return 0, false
}
