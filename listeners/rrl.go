package listeners

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Response rate limiting (dns.rrl) keeps the server from being an
// amplifier for a flood of UDP queries whose source is spoofed, as BIND
// and Knot do it. Responses are counted per {client prefix, response
// class, name}: a positive answer per name and type, NODATA per name and
// type, NXDOMAIN per zone (the owner of the SOA in the authority section,
// so random names under one zone share one account: the "water torture"
// flood), a referral per name, and every error per prefix alone. Each
// account is a token bucket of one second's worth of responses refilled
// at the class's rate, in GCRA form; a response over the limit still
// debits it, down to Window of debt, so a prefix that keeps flooding
// stays limited until it has been quiet for the window.
//
// A limited response is dropped, except every Slip-th of an account,
// which goes out as an empty truncated answer (TC set, the question and
// nothing else): a real client behind a spoofed prefix retries over TCP,
// whose source cannot be spoofed, and a victim receives no more bytes
// than were sent in its name. TCP answers are never limited.
//
// Accounts live in a fixed table of rrlWays-way sets, as the per-client
// rate limit's do: a new account takes the entry of its set whose bucket
// is the fullest, so memory is bounded however many prefixes and names a
// flood spoofs, and accounts being limited are the last forgotten.

// RRLClass is the class of a response, as BIND and Knot count them.
type RRLClass uint8

const (
	RRLAnswer   RRLClass = iota // NOERROR with answers
	RRLNodata                   // NOERROR without answers, not a referral
	RRLNXDomain                 // NXDOMAIN, counted per zone
	RRLReferral                 // NOERROR without answers or AA, NS in authority
	RRLError                    // any other rcode, counted per prefix
	NumRRLClasses
)

// String names the class in metrics.
func (c RRLClass) String() string {
	return [...]string{"answer", "nodata", "nxdomain", "referral", "error"}[c]
}

// RRLAction is what happens to one response.
type RRLAction uint8

const (
	RRLSend   RRLAction = iota // within the limit
	RRLSlip                    // limited: sent empty and truncated
	RRLDrop                    // limited: not sent
	RRLReport                  // over the limit in report-only mode: sent
	NumRRLActions
)

// String names the action in metrics.
func (a RRLAction) String() string { return [...]string{"sent", "slipped", "dropped", "reported"}[a] }

const rrlWays = 4

// RRLCounters count responses by class and action; a nil counter (such
// as those of RRLSend) counts nothing.
type RRLCounters [NumRRLClasses][NumRRLActions]prometheus.Counter

// RRLConfig is one configuration of response rate limiting.
type RRLConfig struct {
	// PerSecond is the responses a second allowed per account, by class;
	// 0 leaves a class unlimited. All 0: RRL is off.
	PerSecond [NumRRLClasses]int
	// Window is how much debt an account may run up: a prefix limited
	// for flooding is limited until it has been quiet this long.
	Window time.Duration
	// Slip sends every Slip-th limited response of an account truncated
	// and empty; 0 drops them all, 1 slips them all.
	Slip int
	// IPv4PrefixLength and IPv6PrefixLength group clients into accounts.
	IPv4PrefixLength, IPv6PrefixLength int
	// MaxTableSize bounds the accounts held (rounded up to a power of two).
	MaxTableSize int
	// ReportOnly counts what would be limited and sends it anyway.
	ReportOnly bool
}

// on reports whether any class is limited.
func (c RRLConfig) on() bool {
	for _, r := range c.PerSecond {
		if r > 0 {
			return true
		}
	}
	return false
}

// RRL decides, for each UDP response, whether it is sent, slipped or
// dropped. It is safe for concurrent use by every UDP reader and
// reconfigurable while they run. A nil RRL sends everything.
type RRL struct {
	params atomic.Pointer[rrlParams] // nil: off
	now    func() time.Time
	epoch  time.Time
	seed   uint64
}

// rrlParams is a configuration with its table; Configure replaces it.
type rrlParams struct {
	cfg      RRLConfig
	interval [NumRRLClasses]int64 // nanoseconds per response; 0: unlimited
	window   int64
	sets     []rrlSet
}

type rrlSet struct {
	mu   sync.Mutex
	ways [rrlWays]rrlEntry
}

// rrlEntry is one account: its key, the time (nanoseconds from the
// epoch) at which its bucket is full again, and its limited responses.
type rrlEntry struct {
	key     uint64
	tat     int64
	limited uint32
}

// NewRRL returns an RRL that sends everything until Configure turns it
// on. now is the clock (time.Now outside tests).
func NewRRL(now func() time.Time) *RRL {
	return &RRL{now: now, epoch: now(), seed: rand.Uint64() | 1}
}

// Configure applies cfg; a table of the same size is kept, so a reload
// forgets no account.
func (r *RRL) Configure(cfg RRLConfig) {
	if !cfg.on() {
		r.params.Store(nil)
		return
	}
	sets := 1
	for sets*rrlWays < max(cfg.MaxTableSize, rrlWays) {
		sets <<= 1
	}
	p := &rrlParams{cfg: cfg, window: int64(max(cfg.Window, time.Second))}
	for c, rate := range cfg.PerSecond {
		if rate > 0 {
			p.interval[c] = max(int64(time.Second)/int64(rate), 1)
		}
	}
	if old := r.params.Load(); old != nil && len(old.sets) == sets {
		p.sets = old.sets
	} else {
		p.sets = make([]rrlSet, sets)
	}
	r.params.Store(p)
}

// Decide counts resp, the answer to client, and says what to do with it.
// It does not allocate.
func (r *RRL) Decide(client netip.Addr, resp []byte) (RRLClass, RRLAction) {
	if r == nil {
		return RRLAnswer, RRLSend
	}
	p := r.params.Load()
	if p == nil {
		return RRLAnswer, RRLSend
	}
	class, name := classify(resp, r.seed)
	interval := p.interval[class]
	if interval == 0 {
		return class, RRLSend
	}
	key := mix(name ^ prefixHash(client, p.cfg, r.seed) ^ uint64(class+1)*0x9e3779b97f4a7c15)
	set := &p.sets[key&uint64(len(p.sets)-1)]
	now := int64(r.now().Sub(r.epoch))
	set.mu.Lock()
	defer set.mu.Unlock()
	e := set.entry(key)
	tat := max(e.tat, now)
	e.tat = min(tat+interval, now+p.window)
	if tat-now <= int64(time.Second)-interval {
		return class, RRLSend
	}
	e.limited++
	switch {
	case p.cfg.ReportOnly:
		return class, RRLReport
	case p.cfg.Slip > 0 && e.limited%uint32(p.cfg.Slip) == 0:
		return class, RRLSlip
	}
	return class, RRLDrop
}

// entry returns key's account, or hands it the fullest one of the set.
func (s *rrlSet) entry(key uint64) *rrlEntry {
	oldest := &s.ways[0]
	for i := range s.ways {
		e := &s.ways[i]
		if e.key == key {
			return e
		}
		if e.tat < oldest.tat {
			oldest = e
		}
	}
	*oldest = rrlEntry{key: key}
	return oldest
}

// prefixHash hashes the client's prefix.
func prefixHash(client netip.Addr, cfg RRLConfig, seed uint64) uint64 {
	client = client.Unmap()
	bits := cfg.IPv6PrefixLength
	if client.Is4() {
		bits = cfg.IPv4PrefixLength
	}
	if p, err := client.Prefix(bits); err == nil {
		client = p.Addr()
	}
	a := client.As16()
	return mix(binary.BigEndian.Uint64(a[:8])^seed) ^ mix(binary.BigEndian.Uint64(a[8:])+seed)
}

// mix is the splitmix64 finaliser: every input bit moves every output
// bit, so the low bits select a set evenly.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
