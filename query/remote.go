package query

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/cache"
	"github.com/shardns/shardns/zone"
)

// Cluster is how a replica answers names of zones that other replicas
// hold: it asks them in the order the ring gives, and caches what they
// answer. A replica never answers such a name from anything but an
// owner's answer or a fresh cached one.
type Cluster struct {
	// Ask sends the question to the replica called member.
	Ask func(ctx context.Context, member, zoneKey, name string, qtype uint16) (*dns.Msg, error)
	// Cache holds owners' answers, bounded in size and by their TTLs.
	Cache *cache.Cache
	// Timeout bounds one attempt; Attempts bounds the replicas tried.
	Timeout  time.Duration
	Attempts int
	// MaxInFlight bounds questions being asked; beyond it, SERVFAIL.
	MaxInFlight int64
	Now         func() time.Time
	// Observe is told how each attempt at member went (for metrics); may
	// be nil.
	Observe func(member string, took time.Duration, err error)
	// CacheResult is told whether the owners' cache answered ("hit") or
	// not ("miss"); may be nil.
	CacheResult func(result string)

	inflight atomic.Int64
}

// remote answers a name whose zone is held elsewhere.
func (h *Handler) remote(x *exchange, r *dns.Msg, name string, resp zone.Response, out []byte) []byte {
	c := h.Cluster
	q := x.req.Question[0]
	key := cache.Key{Name: name, Type: q.Qtype, Class: q.Qclass}
	if m, st, _ := c.Cache.Get(key, c.Now()); st == cache.Fresh {
		c.count("hit")
		return h.answerFromOwner(x, r, name, m, out)
	}
	c.count("miss")
	if x.t.Late == nil || c.inflight.Add(1) > c.MaxInFlight {
		if x.t.Late != nil {
			c.inflight.Add(-1)
		}
		r.Rcode = dns.RcodeServerFailure
		return h.pack(x, r, out)
	}
	zoneKey, order := resp.Zone, resp.Remote
	if len(order) > c.Attempts {
		order = order[:c.Attempts]
	}
	go func() {
		defer c.inflight.Add(-1)
		resp := r.Copy()
		for _, member := range order {
			ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
			start := time.Now()
			m, err := c.Ask(ctx, member, zoneKey, name, q.Qtype)
			cancel()
			if c.Observe != nil {
				c.Observe(member, time.Since(start), err)
			}
			if err != nil {
				continue
			}
			c.Cache.Put(key, m, c.Now())
			if b := h.answerFromOwner(x, resp, name, m, nil); b != nil {
				x.t.Late.WriteLate(b, x.t.Client)
			} // else the forwarder answers late itself
			return
		}
		h.logError(x, "no owner of the zone answered", context.DeadlineExceeded)
		resp.Rcode = dns.RcodeServerFailure
		x.t.Late.WriteLate(h.pack(x, resp, nil), x.t.Client)
	}()
	return nil
}

func (c *Cluster) count(result string) {
	if c.CacheResult != nil {
		c.CacheResult(result)
	}
}

// answerFromOwner answers x from an owner's (or cached) answer m. An
// NXDOMAIN in a fallthrough zone goes to the forwarder, as it does when
// answered locally: a reverse name no owner knows (a node-local cache
// asks owners for every reverse zone) may be known upstream. It returns
// nil when the forwarder will answer late.
func (h *Handler) answerFromOwner(x *exchange, r *dns.Msg, name string, m *dns.Msg, out []byte) []byte {
	if m.Rcode == dns.RcodeNameError && h.fallsThrough(name) {
		return h.forward(x, r, name, "", out)
	}
	return h.packOwner(x, r, name, m, out)
}

// packOwner packs an owner's (or cached) answer for name as the answer to x.
func (h *Handler) packOwner(x *exchange, r *dns.Msg, name string, m *dns.Msg, out []byte) []byte {
	h.setAnswer(x, r, name, x.req.Question[0].Name, zone.Response{Rcode: m.Rcode, Answer: m.Answer, Ns: m.Ns, Extra: m.Extra,
		Referral: !m.Authoritative}) // an owner's referral comes without AA
	return h.pack(x, r, out)
}
