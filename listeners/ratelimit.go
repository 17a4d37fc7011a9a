package listeners

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Rate limiting (dns.rateLimit) bounds the UDP queries each client
// address may send. A query over the limit is dropped without an answer:
// answering it, even with REFUSED or TC, would still send a packet to an
// address that may be spoofed. TCP is not limited: its source cannot be
// spoofed and the connection bounds already hold.
//
// Each client has a token bucket of Burst queries refilled at PerSecond,
// kept in the GCRA form (one theoretical arrival time per client), so a
// client costs 24 bytes. Clients live in a fixed table of rateLimitSets
// sets of rateLimitWays entries: memory is bounded however many source
// addresses a flood spoofs. A new client takes the entry of its set with
// the oldest arrival time, which is a client whose bucket is full (or the
// closest to full): forgetting it changes nothing, while clients being
// limited are the last to be forgotten.

const (
	rateLimitSets = 1 << 14 // power of two: a hash selects a set by masking
	rateLimitWays = 4       // 65536 clients, about 1.7 MB, only when enabled
)

// RateLimiter decides whether a client may send one more query. It is safe
// for concurrent use by every UDP reader and reconfigurable while they run.
// A nil RateLimiter allows everything.
type RateLimiter struct {
	params atomic.Pointer[rateParams] // nil: no limit
	now    func() time.Time
	epoch  time.Time // arrival times count nanoseconds from here
	seed   maphash.Seed
}

// rateParams is one configuration of the limit with the table it applies
// to; Configure replaces it whole.
type rateParams struct {
	interval  int64 // nanoseconds between two queries at the rate
	tolerance int64 // how far ahead of now a client's schedule may run: interval × (burst − 1)
	perSecond int
	burst     int
	table     *[rateLimitSets]rateSet
}

// rateSet is one set of the table; its lock is held for a few
// comparisons, and readers rarely share a set.
type rateSet struct {
	mu   sync.Mutex
	ways [rateLimitWays]rateEntry
}

// rateEntry is one client: its address and the time, in nanoseconds from
// the epoch, at which its bucket would be full again plus one interval.
type rateEntry struct {
	addr [16]byte
	tat  int64
}

// NewRateLimiter returns a limiter that allows everything until
// Configure sets a rate. now is the clock (time.Now outside tests).
func NewRateLimiter(now func() time.Time) *RateLimiter {
	return &RateLimiter{now: now, epoch: now(), seed: maphash.MakeSeed()}
}

// Configure sets the rate: perSecond queries per client address with
// bursts of burst (0: perSecond). perSecond 0 turns the limit off. The
// table is kept across changes, so a reload forgets no client.
func (l *RateLimiter) Configure(perSecond, burst int) {
	if perSecond <= 0 {
		l.params.Store(nil)
		return
	}
	if burst <= 0 {
		burst = perSecond
	}
	old := l.params.Load()
	if old != nil && old.perSecond == perSecond && old.burst == burst {
		return
	}
	interval := max(int64(time.Second)/int64(perSecond), 1)
	p := &rateParams{interval: interval, tolerance: interval * int64(burst-1), perSecond: perSecond, burst: burst}
	if old != nil {
		p.table = old.table
	} else {
		p.table = new([rateLimitSets]rateSet)
	}
	l.params.Store(p)
}

// Allow reports whether client may send a query now, and counts it if so.
// It does not allocate.
func (l *RateLimiter) Allow(client netip.Addr) bool {
	if l == nil {
		return true
	}
	p := l.params.Load()
	if p == nil {
		return true
	}
	key := client.Unmap().As16()
	set := &p.table[maphash.Comparable(l.seed, key)&(rateLimitSets-1)]
	now := int64(l.now().Sub(l.epoch))
	set.mu.Lock()
	defer set.mu.Unlock()
	e := set.entry(key)
	tat := max(e.tat, now)
	if tat-now > p.tolerance {
		return false
	}
	e.tat = tat + p.interval
	return true
}

// entry returns key's entry, or hands it the entry whose bucket is the
// fullest.
func (s *rateSet) entry(key [16]byte) *rateEntry {
	oldest := &s.ways[0]
	for i := range s.ways {
		e := &s.ways[i]
		if e.addr == key {
			return e
		}
		if e.tat < oldest.tat {
			oldest = e
		}
	}
	*oldest = rateEntry{addr: key}
	return oldest
}

// rateLimited reports whether the listener drops a datagram from client,
// counting the drop.
func (l *listener) rateLimited(client netip.AddrPort) bool {
	if l.cfg.RateLimit.Allow(client.Addr()) {
		return false
	}
	if l.cfg.RateLimited != nil {
		l.cfg.RateLimited.Inc()
	}
	return true
}
