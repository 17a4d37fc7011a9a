package query

import (
	"context"
	"slices"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/cache"
	"github.com/shardns/shardns/zone"
)

// chain lists the upstreams that may be asked for name, in turn: the
// stubs whose zones hold it, longest zone first, then the default one;
// those whose Except zones hold name are left out (excepted reports
// that one was). The first is asked; the next ones only after an answer
// with one of the Next rcodes of the one before, as CoreDNS's forward
// passes a name it excepts, or an answer it is told to pass over, to
// the forward that follows it.
func (u *Upstream) chain(name string) (list []*Upstream, excepted bool) {
	if u == nil {
		return nil, false
	}
	var stubs []*Stub
	for i := range u.Stubs {
		if zone.InZone(name, u.Stubs[i].Zone) {
			stubs = append(stubs, &u.Stubs[i])
		}
	}
	slices.SortStableFunc(stubs, func(a, b *Stub) int { return len(b.Zone) - len(a.Zone) })
	add := func(up *Upstream) {
		switch {
		case slices.Contains(list, up):
		case longestIn(name, up.Except) >= 0:
			excepted = true
		default:
			list = append(list, up)
		}
	}
	for _, s := range stubs {
		add(s.Upstream)
	}
	if u.Forwarder != nil {
		add(u)
	}
	return list, excepted
}

// pick is the upstream name is asked of first; nil when there is none.
func (u *Upstream) pick(name string) *Upstream {
	if list, _ := u.chain(name); len(list) > 0 {
		return list[0]
	}
	return nil
}

// passes reports whether u's answer r is passed over for the next
// upstream of a chain (u.Next), rather than answered and cached.
func (u *Upstream) passes(r *dns.Msg) bool {
	return slices.Contains(u.Next, r.Rcode)
}

// exchangeChain asks list[0], whose slot the caller holds, and, while
// one answers one of its Next rcodes, the next upstream: from its cache
// when fresh there, else within that forwarder's own bound on queries
// in flight. The answer is cached by the upstream that gave it; last is
// the upstream asked last, whose cache may hold a stale answer when err
// is set. Every attempt shares ctx, the first upstream's deadline.
func (h *Handler) exchangeChain(ctx context.Context, list []*Upstream, key cache.Key, ask *dns.Msg, tcp bool) (reply *dns.Msg, last *Upstream, err error) {
	for i, u := range list {
		if i > 0 {
			if m := h.cached(u, key); m != nil {
				return m, u, nil
			}
			if err := u.Forwarder.Acquire(); err != nil {
				return nil, u, err
			}
		}
		reply, err = u.Forwarder.ExchangeFor(ctx, ask, tcp)
		if i > 0 {
			u.Forwarder.Release()
		}
		if err != nil {
			return nil, u, err
		}
		if i < len(list)-1 && u.passes(reply) {
			continue
		}
		return h.store(u, key, reply), u, nil
	}
	return nil, nil, nil // unreachable: list is never empty
}

// cached is u's fresh answer for key, nil when there is none.
func (h *Handler) cached(u *Upstream, key cache.Key) *dns.Msg {
	if u.Cache == nil {
		return nil
	}
	m, st, _ := u.Cache.Get(key, u.Now())
	if st != cache.Fresh {
		h.countCache("miss")
		return nil
	}
	h.countCache("hit")
	return m
}

// store caches reply in u's cache and returns it as a cache hit would
// answer it (cache.PutAsHit).
func (h *Handler) store(u *Upstream, key cache.Key, reply *dns.Msg) *dns.Msg {
	if u.Cache == nil {
		return reply
	}
	m, stored := u.Cache.PutAsHit(key, reply, u.Now())
	if stored {
		h.setCacheSize()
	}
	return m
}
