// Package cache is the response cache in front of the forwarder (and of
// answers fetched from other replicas): positive and negative answers
// with their own TTL caps, a minimum TTL, bounds on entries and on the
// bytes they hold with random eviction, prefetch of popular names near expiry, and serving stale
// answers for a while when the upstreams fail (RFC 8767). As CoreDNS's
// cache plugin, it may keep upstreams' SERVFAILs briefly, serve TTLs as
// stored (keepttl), and hold only the names of some zones.
package cache

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
)

// Config configures a Cache.
type Config struct {
	Size            int           // entries at most; random ones are evicted beyond it
	MaxBytes        int64         // bytes held at most (EntryCost); 0 bounds entries only
	SuccessMaxTTL   time.Duration // cap of positive answers (NOERROR with records)
	DenialMaxTTL    time.Duration // cap of NXDOMAIN and NODATA
	MinTTL          time.Duration // floor of every cached TTL
	PrefetchHits    int           // hits that make an entry popular; 0 disables prefetch
	PrefetchPercent int           // popular entries are refreshed below this % of their TTL
	ServeStale      time.Duration // how long past expiry an answer may serve when upstreams fail
	// ServfailTTL is how long an upstream's SERVFAIL is kept; 0 keeps
	// none. It is neither capped nor floored, and never served stale.
	ServfailTTL time.Duration
	// KeepTTL serves answers with the TTLs they were stored with (capped
	// at the entry's life), not counted down; entries still expire.
	KeepTTL bool
	// Zones limits the cache to names in these zones (lower-case, fully
	// qualified); empty: every name.
	Zones []string
}

// Key identifies a cached answer.
type Key struct {
	Name  string // lower-case
	Type  uint16
	Class uint16
	DO    bool // DNSSEC OK: answers with and without signatures differ
	CD    bool
}

// State is the outcome of Get.
type State uint8

// Get outcomes.
const (
	Miss  State = iota
	Fresh       // within its TTL
	Stale       // expired, but within ServeStale
)

// StaleTTL is the TTL of stale answers (RFC 8767 section 4).
const StaleTTL = 30

const shards = 16

// Cache is safe for concurrent use.
type Cache struct {
	cfg    Config
	seed   maphash.Seed
	shards [shards]shard
}

type shard struct {
	mu       sync.Mutex
	entries  map[Key]*Entry
	max      int
	bytes    int64 // the EntryCost of every entry held
	maxBytes int64 // 0: no bound
}

// Entry is one cached answer. It is never modified: a Put for the same key
// stores a new Entry, so what a caller built from one (a packed response)
// is current while Peek returns the same Entry.
type Entry struct {
	msg         *dns.Msg // as received, OPT removed; never modified
	cost        int64    // EntryCost of msg
	preferred   int      // PutPreferred's
	stored      time.Time
	ttl         time.Duration
	hits        atomic.Int32
	prefetching atomic.Bool
}

// New returns an empty cache.
func New(cfg Config) *Cache {
	c := &Cache{cfg: cfg, seed: maphash.MakeSeed()}
	per := max(cfg.Size/shards, 1)
	var perBytes int64
	if cfg.MaxBytes > 0 {
		perBytes = max(cfg.MaxBytes/shards, 1)
	}
	for i := range c.shards {
		c.shards[i] = shard{entries: map[Key]*Entry{}, max: per, maxBytes: perBytes}
	}
	return c
}

func (c *Cache) shard(k Key) *shard {
	return &c.shards[maphash.String(c.seed, k.Name)%shards]
}

// Get returns a copy of the cached answer for k with TTLs counted down to
// now, and whether the caller should refresh it in the background
// (prefetch). Stale answers carry StaleTTL; the caller serves them only
// after the upstreams failed.
func (c *Cache) Get(k Key, now time.Time) (msg *dns.Msg, state State, prefetch bool) {
	h, state, prefetch := c.Peek(k, now)
	return h.Copy(state), state, prefetch
}

// Copy is the answer of h, a hit Peek found in state, as Get gives it: a
// copy with the TTLs counted down (StaleTTL when stale); nil for a miss.
func (h Hit) Copy(state State) *dns.Msg {
	switch state {
	case Fresh:
		return withTTL(h.Entry.msg, h.Age, h.Remaining, false)
	case Stale:
		return withTTL(h.Entry.msg, 0, StaleTTL*time.Second, true)
	}
	return nil
}

// Hit is a cached answer as Peek finds it, not copied.
type Hit struct {
	Entry *Entry
	// Age is how long ago it was stored; Remaining how long it stays
	// fresh (at most 0 when stale). CountDown turns them into TTLs. With
	// KeepTTL a fresh hit is as if just stored: Age 0, Remaining its life.
	Age, Remaining time.Duration
}

// Peek is Get without the copy, for callers that keep what they build
// from an entry (packed responses) and count its TTLs down themselves
// with CountDown. It counts the hit and decides prefetch as Get does.
func (c *Cache) Peek(k Key, now time.Time) (h Hit, state State, prefetch bool) {
	s := c.shard(k)
	s.mu.Lock()
	e := s.entries[k]
	s.mu.Unlock()
	if e == nil {
		return Hit{}, Miss, false
	}
	age := now.Sub(e.stored)
	remaining := e.ttl - age
	if remaining <= 0 {
		if -remaining > c.cfg.ServeStale || e.msg.Rcode == dns.RcodeServerFailure {
			c.remove(k, e)
			return Hit{}, Miss, false
		}
		return Hit{Entry: e, Age: age, Remaining: remaining}, Stale, false
	}
	hits := e.hits.Add(1)
	if c.cfg.PrefetchHits > 0 && int(hits) >= c.cfg.PrefetchHits &&
		remaining*100 < e.ttl*time.Duration(c.cfg.PrefetchPercent) && !e.prefetching.Swap(true) {
		prefetch = true
	}
	if c.cfg.KeepTTL {
		// As if stored just now: CountDown then gives the TTLs stored.
		return Hit{Entry: e, Age: 0, Remaining: e.ttl}, Fresh, prefetch
	}
	return Hit{Entry: e, Age: age, Remaining: remaining}, Fresh, prefetch
}

// covers reports whether name (lower-case) is one the cache may hold.
func (c *Cache) covers(name string) bool {
	if len(c.cfg.Zones) == 0 {
		return true
	}
	for _, z := range c.cfg.Zones {
		if inZone(name, z) {
			return true
		}
	}
	return false
}

// inZone reports whether name is zone or below it, on a label boundary.
func inZone(name, zone string) bool {
	if zone == "." {
		return true
	}
	n := len(name) - len(zone)
	return n >= 0 && name[n:] == zone && (n == 0 || name[n-1] == '.')
}

// Msg is the answer as stored (OPT removed), with the TTLs it came with.
// It is shared: callers must not modify it.
func (e *Entry) Msg() *dns.Msg { return e.msg }

// Preferred is how many records lead the answer as preferred for this
// process's zone (PutPreferred), 0 for any other.
func (e *Entry) Preferred() int { return e.preferred }

// Stored is when the entry was stored: the time Put was given.
func (e *Entry) Stored() time.Time { return e.stored }

// MaxLife is the longest an entry may be kept, fresh or stale: its TTL
// at most the largest cap (or the floor), then ServeStale.
func (c *Cache) MaxLife() time.Duration {
	return max(c.cfg.SuccessMaxTTL, c.cfg.DenialMaxTTL, c.cfg.MinTTL, c.cfg.ServfailTTL) + c.cfg.ServeStale
}

// Remove drops the entry of k if it is still e: an answer found to be
// outdated by other means than its TTL.
func (c *Cache) Remove(k Key, e *Entry) { c.remove(k, e) }

func (c *Cache) remove(k Key, e *Entry) {
	s := c.shard(k)
	s.mu.Lock()
	if s.entries[k] == e {
		s.drop(k, e)
	}
	s.mu.Unlock()
}

// drop deletes k, holding e, from the shard; s.mu is held.
func (s *shard) drop(k Key, e *Entry) {
	delete(s.entries, k)
	s.bytes -= e.cost
}

// EntryCost is what the cache counts against Config.MaxBytes for m: its
// wire length and, for each record, about what a parsed record holds
// beyond it (its header, owner name, interface and slice headers). A
// 64 KiB answer of 4,000 A records holds about 8 times its wire length
// in memory, which the wire length alone would hide; the count errs
// high for the usual answer of a few records.
func EntryCost(m *dns.Msg) int64 {
	const perRecord = 128
	return int64(m.Len() + perRecord*(len(m.Answer)+len(m.Ns)+len(m.Extra)+len(m.Question)))
}

// PutAsHit stores m for k as Put does and returns it as a hit would
// answer it, with the capped TTLs, so that the first answer and the
// ones after it agree (as CoreDNS's cache caps the reply it stores); m
// itself when it was not stored. stored reports whether it was.
func (c *Cache) PutAsHit(k Key, m *dns.Msg, now time.Time) (answer *dns.Msg, stored bool) {
	return c.PutPreferredAsHit(k, m, 0, now)
}

// PutPreferredAsHit is PutAsHit for an answer whose first preferred
// records were preferred for this process's zone (PutPreferred).
func (c *Cache) PutPreferredAsHit(k Key, m *dns.Msg, preferred int, now time.Time) (answer *dns.Msg, stored bool) {
	if !c.PutPreferred(k, m, preferred, now) {
		return m, false
	}
	if hit, st, _ := c.Get(k, now); st == Fresh {
		return hit, true
	}
	return m, true
}

// Put stores m for k if it is cacheable, and reports whether it did. Only
// NOERROR and NXDOMAIN answers that were not truncated are kept (and
// SERVFAIL with a ServfailTTL), of names in the cache's zones; negative
// answers need an SOA to know their TTL (RFC 2308).
func (c *Cache) Put(k Key, m *dns.Msg, now time.Time) bool { return c.PutPreferred(k, m, 0, now) }

// PutPreferred is Put for an owner's answer ordered for this process's
// zone, whose first preferred records lead it as preferred for the zone
// (zone.Response.Preferred): the entry keeps the count (Entry.Preferred),
// so the answers given from it keep those records first.
func (c *Cache) PutPreferred(k Key, m *dns.Msg, preferred int, now time.Time) bool {
	ttl, ok := c.ttlOf(m)
	if !ok || !c.covers(k.Name) {
		return false
	}
	stored := m.Copy()
	stored.Extra = withoutOPT(stored.Extra)
	e := &Entry{msg: stored, stored: now, ttl: ttl, cost: EntryCost(stored), preferred: preferred}
	s := c.shard(k)
	if s.maxBytes > 0 && e.cost > s.maxBytes {
		return false // larger than its shard's share: it would empty it
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, exists := s.entries[k]; exists {
		if stored.Rcode == dns.RcodeServerFailure && c.keeps(old, now) {
			return false // an answer that may still serve stale outlives a SERVFAIL
		}
		s.drop(k, old)
	}
	for len(s.entries) > 0 && (len(s.entries) >= s.max || s.maxBytes > 0 && s.bytes+e.cost > s.maxBytes) {
		for victim, ve := range s.entries { // map order is random enough to evict
			s.drop(victim, ve)
			break
		}
	}
	s.entries[k] = e
	s.bytes += e.cost
	return true
}

// keeps reports whether e, an answer other than a SERVFAIL, may still
// be served at now, fresh or stale.
func (c *Cache) keeps(e *Entry, now time.Time) bool {
	return e.msg.Rcode != dns.RcodeServerFailure && now.Sub(e.stored)-e.ttl <= c.cfg.ServeStale
}

// ttlOf is how long m may be cached, capped and floored by the config.
func (c *Cache) ttlOf(m *dns.Msg) (time.Duration, bool) {
	if m.Rcode == dns.RcodeServerFailure && !m.Truncated {
		return c.cfg.ServfailTTL, c.cfg.ServfailTTL > 0
	}
	if m.Truncated || (m.Rcode != dns.RcodeSuccess && m.Rcode != dns.RcodeNameError) {
		return 0, false
	}
	var ttl uint32
	var capTTL time.Duration
	if m.Rcode == dns.RcodeSuccess && len(m.Answer) > 0 {
		ttl = minTTL(m.Answer)
		capTTL = c.cfg.SuccessMaxTTL
	} else {
		soa := findSOA(m.Ns)
		if soa == nil {
			return 0, false
		}
		ttl = min(soa.Hdr.Ttl, soa.Minttl)
		capTTL = c.cfg.DenialMaxTTL
	}
	d := min(time.Duration(ttl)*time.Second, capTTL)
	d = max(d, c.cfg.MinTTL)
	return d, d > 0
}

func minTTL(rrs []dns.RR) uint32 {
	m := ^uint32(0)
	for _, rr := range rrs {
		if rr.Header().Rrtype != dns.TypeOPT {
			m = min(m, rr.Header().Ttl)
		}
	}
	return m
}

func findSOA(rrs []dns.RR) *dns.SOA {
	for _, rr := range rrs {
		if soa, ok := rr.(*dns.SOA); ok {
			return soa
		}
	}
	return nil
}

func withoutOPT(rrs []dns.RR) []dns.RR {
	out := rrs[:0]
	for _, rr := range rrs {
		if rr.Header().Rrtype != dns.TypeOPT {
			out = append(out, rr)
		}
	}
	return out
}

// withTTL copies m with every TTL reduced by age and capped at limit, or
// set to limit when fixed.
func withTTL(m *dns.Msg, age, limit time.Duration, fixed bool) *dns.Msg {
	out := m.Copy()
	for _, sec := range [][]dns.RR{out.Answer, out.Ns, out.Extra} {
		for _, rr := range sec {
			h := rr.Header()
			h.Ttl = CountDown(h.Ttl, age, limit)
			if fixed {
				h.Ttl = CountDown(^uint32(0), 0, limit)
			}
		}
	}
	return out
}

// CountDown is the TTL a record stored with ttl carries after age, capped
// at limit, the time its entry stays fresh: whole seconds of age are
// taken off, and a partial second left still counts as one.
func CountDown(ttl uint32, age, limit time.Duration) uint32 {
	sub := uint32(age / time.Second)
	capTTL := uint32((limit + time.Second - 1) / time.Second)
	if ttl > sub {
		ttl -= sub
	} else {
		ttl = 0
	}
	return min(ttl, capTTL)
}

// Bytes is what the entries held cost, as counted against
// Config.MaxBytes.
func (c *Cache) Bytes() int64 {
	var n int64
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += s.bytes
		s.mu.Unlock()
	}
	return n
}

// Len is the number of entries.
func (c *Cache) Len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.entries)
		s.mu.Unlock()
	}
	return n
}

// PrefetchDone clears the prefetch mark of k when a refresh failed, so a
// later hit may try again.
func (c *Cache) PrefetchDone(k Key) {
	s := c.shard(k)
	s.mu.Lock()
	e := s.entries[k]
	s.mu.Unlock()
	if e != nil {
		e.prefetching.Store(false)
	}
}
