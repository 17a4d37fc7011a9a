package query

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/cache"
	"github.com/shardns/shardns/forward"
	"github.com/shardns/shardns/zone"
)

// Upstream is the resolver plane behind the cluster zones: the forwarder
// and the cache in front of it, and the stub domains.
type Upstream struct {
	// Forwarder asks the default upstreams; nil when there are none, and
	// names in no stub zone are refused.
	Forwarder   *forward.Forwarder
	Cache       *cache.Cache // nil disables caching
	Fallthrough []string     // zones whose NXDOMAIN is asked upstream (lower-case FQDNs)
	// Final are zones whose NXDOMAIN is the answer, though a wider
	// Fallthrough zone holds them: k8s_external's, which answer what the
	// kubernetes plugin passes on (a reverse name), and whose miss ends
	// there unless a Fallthrough zone as long or longer says otherwise.
	Final    []string
	Deadline time.Duration
	Now      func() time.Time
	// Stubs send the names of their zones to other upstreams, each with
	// its own forwarder (and health checks) and cache: stub domains.
	Stubs []Stub
	// Except are zones whose names this upstream is not asked for
	// (lower-case FQDNs): they go to the next upstream of the chain, and
	// get SERVFAIL when there is none (forward's except).
	Except []string
	// Next are rcodes whose answer is passed over for the next upstream
	// of the chain (forward's next); from the last one it is the answer.
	Next []int
}

// Stub is one zone of a stub domain.
type Stub struct {
	Zone string // lower-case FQDN; "." is every name
	// Upstream forwards and caches for the zone; its Stubs and
	// Fallthrough are not used.
	Upstream *Upstream
}

// fallsThrough reports whether NXDOMAIN for name goes upstream: a name
// in a fallthrough zone, unless a zone file's zone holds it, which is the
// authority on what does not exist there.
func (h *Handler) fallsThrough(name string) bool {
	return h.Upstream.fallsThrough(name) && h.Config.FileOrigin(h.Zones.Directory(), name) == ""
}

// fallsThrough reports whether NXDOMAIN for name goes upstream.
func (u *Upstream) fallsThrough(name string) bool {
	if u == nil {
		return false
	}
	return longestIn(name, u.Fallthrough) >= max(0, longestIn(name, u.Final))
}

// longestIn is the length of the longest of zones that name is in; -1
// when it is in none.
func longestIn(name string, zones []string) int {
	n := -1
	for _, z := range zones {
		if zone.InZone(name, z) && len(z) > n {
			n = len(z)
		}
	}
	return n
}

// forward answers name from the cache, or asks upstream on another
// goroutine and answers through t.Late, so a slow upstream never holds a
// listener. With alias set (autopath), name is asked in place of the
// question and the answer comes as a CNAME from alias to name.
func (h *Handler) forward(x *exchange, r *dns.Msg, name, alias string, out []byte) []byte {
	list, excepted := h.Upstream.chain(name)
	if len(list) == 0 {
		// Nothing upstream: refused, as CoreDNS refuses names that no
		// server block serves; SERVFAIL when a forwarder excepts the
		// name, as CoreDNS's forward with no plugin after it.
		r.Rcode = dns.RcodeRefused
		if excepted {
			r.Rcode = dns.RcodeServerFailure
		}
		return h.pack(x, r, out)
	}
	u := list[0]
	ask := x.req
	if alias != "" || x.fed != nil && x.fed.chased != "" {
		ask = x.req.Copy()
		ask.Question[0].Name = name
	}
	key := cacheKey(ask, name)
	if u.Cache != nil {
		m, st, prefetch := u.Cache.Get(key, u.Now())
		if st == cache.Fresh {
			h.countCache("hit")
			if prefetch {
				h.prefetch(u, key, ask)
			}
			return h.packUpstream(x, r, m, alias, out)
		}
		h.countCache("miss")
	}
	if x.t.Late == nil {
		r.Rcode = dns.RcodeServerFailure
		return h.pack(x, r, out)
	}
	if err := u.Forwarder.Acquire(); err != nil {
		if h.Metrics != nil {
			h.Metrics.Forward.ConcurrentReject.Inc()
		}
		r.Rcode = dns.RcodeRefused
		return h.pack(x, r, out)
	}
	go func() {
		defer u.Forwarder.Release()
		ctx, cancel := context.WithTimeout(context.Background(), u.Deadline)
		defer cancel()
		// Upstreams are asked over the client's transport; a question
		// shardns asks itself (DNS64's A) marks TCP only to lift the
		// size limit, and is asked as over UDP.
		reply, last, err := h.exchangeChain(ctx, list, key, ask, x.t.TCP && !x.t.internal)
		resp := r.Copy()
		switch {
		case err == nil:
			x.t.Late.WriteLate(h.packUpstream(x, resp, reply, alias, nil), x.t.Client)
			return
		case last.Cache != nil:
			if m, st, _ := last.Cache.Get(key, last.Now()); st == cache.Stale {
				h.countCache("stale")
				x.t.Late.WriteLate(h.packUpstream(x, resp, m, alias, nil), x.t.Client)
				return
			}
		}
		h.logError(x, "no upstream answered", err)
		resp.Rcode = dns.RcodeServerFailure
		if errors.Is(err, forward.ErrOverloaded) {
			resp.Rcode = dns.RcodeRefused
		}
		x.t.Late.WriteLate(h.pack(x, resp, nil), x.t.Client)
	}()
	return nil
}

// prefetch refreshes a popular cache entry in the background, within the
// forwarder's bound on queries in flight.
func (h *Handler) prefetch(u *Upstream, key cache.Key, req *dns.Msg) {
	if u.Forwarder.Acquire() != nil {
		u.Cache.PrefetchDone(key)
		return
	}
	if h.Metrics != nil {
		h.Metrics.Cache.Prefetch.WithLabelValues(h.Server).Inc()
	}
	req = req.Copy()
	go func() {
		defer u.Forwarder.Release()
		ctx, cancel := context.WithTimeout(context.Background(), u.Deadline)
		defer cancel()
		reply, err := u.Forwarder.Exchange(ctx, req)
		// An answer the chain passes over is never u's to cache.
		if err != nil || u.passes(reply) || !u.Cache.Put(key, reply, u.Now()) {
			u.Cache.PrefetchDone(key)
		}
	}()
}

// packUpstream packs an upstream (or cached) reply as the answer to x.
// For autopath (alias set), an upstream NXDOMAIN answers the question as
// asked, as if the search path had been walked by the client; anything
// else comes behind a CNAME from alias.
func (h *Handler) packUpstream(x *exchange, r, reply *dns.Msg, alias string, out []byte) []byte {
	if x.fed != nil && x.fed.chased != "" {
		return h.packFederatedUpstream(x, r, reply, out)
	}
	if alias != "" && reply.Rcode == dns.RcodeNameError {
		q := x.req.Question[0]
		name := lower(q.Name)
		h.setAnswer(x, r, name, q.Name, zone.Answer(h.Config, h.Zones, zone.Question{Name: name, Type: q.Qtype}))
		return h.pack(x, r, out)
	}
	r.Rcode = reply.Rcode
	// The upstream's AA bit, cached or not, as CoreDNS's forward and
	// cache pass it on: an answer a stub domain's authoritative server
	// gave stays authoritative, a recursive resolver's does not become so.
	r.Authoritative = reply.Authoritative
	r.RecursionAvailable = reply.RecursionAvailable
	r.AuthenticatedData = reply.AuthenticatedData
	r.Answer = reply.Answer
	if alias != "" {
		r.Answer = cnamed(reply.Answer, alias)
	}
	r.Ns = reply.Ns
	r.Extra = withoutOPT(reply.Extra)
	if h.LoadBalance {
		r.Answer = shuffled(r.Answer)
	}
	return h.pack(x, r, out)
}

func withoutOPT(rrs []dns.RR) []dns.RR {
	out := make([]dns.RR, 0, len(rrs))
	for _, rr := range rrs {
		if rr.Header().Rrtype != dns.TypeOPT {
			out = append(out, rr)
		}
	}
	return out
}

func cacheKey(req *dns.Msg, name string) cache.Key {
	q := req.Question[0]
	k := cache.Key{Name: name, Type: q.Qtype, Class: q.Qclass, CD: req.CheckingDisabled}
	if opt := req.IsEdns0(); opt != nil {
		k.DO = opt.Do()
	}
	return k
}

func (h *Handler) countCache(kind string) {
	if h.Metrics == nil {
		return
	}
	switch kind {
	case "hit":
		h.Metrics.Cache.Hits.WithLabelValues(h.Server, "all").Inc()
	case "miss":
		h.Metrics.Cache.Misses.WithLabelValues(h.Server).Inc()
	case "stale":
		h.Metrics.Cache.Stale.WithLabelValues(h.Server).Inc()
	}
}

// setCacheSize exports the entries of the forwarders' caches, the
// default one's and the stubs', as one cache.
func (h *Handler) setCacheSize() {
	if h.Metrics == nil {
		return
	}
	n := 0
	for _, c := range h.Upstream.caches() {
		n += c.Len()
	}
	h.Metrics.Cache.Entries.WithLabelValues(h.Server, "all").Set(float64(n))
}

// caches lists the caches of the default upstream and the stubs.
func (u *Upstream) caches() []*cache.Cache {
	var out []*cache.Cache
	if u.Cache != nil {
		out = append(out, u.Cache)
	}
	for _, s := range u.Stubs {
		// A stub of several zones lists its cache once per zone.
		if s.Upstream.Cache != nil && !slices.Contains(out, s.Upstream.Cache) {
			out = append(out, s.Upstream.Cache)
		}
	}
	return out
}

// LateBound is the longest an answer h sends late may take: the budget
// of a question asked of the replicas holding its zone, then the
// forwarder's deadline (an owner's NXDOMAIN in a fallthrough zone is
// asked upstream after). A DNS over HTTPS request, which has no later
// write to wait for, waits this long; it is read per request, so a
// reload that changes a deadline applies to the next request.
func (h *Handler) LateBound() time.Duration {
	var d time.Duration
	if c := h.Cluster; c != nil {
		d += c.budget()
	}
	var up time.Duration
	if u := h.Upstream; u != nil {
		up = u.Deadline
	}
	for _, v := range h.Views { // a view forwards with its own deadline
		if u := v.Handler.Upstream; u != nil {
			up = max(up, u.Deadline)
		}
	}
	return d + up
}
