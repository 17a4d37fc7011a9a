package query

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/cache"
	"github.com/shardns/shardns/zone"
)

// Cluster is how a replica answers names of zones that other replicas
// hold: it asks them in the order the ring gives, and caches what they
// answer. A replica never answers such a name from anything but an
// owner's answer, a fresh cached one, or its own zone once it holds it.
type Cluster struct {
	// Ask sends the question to the replica called member. An error that
	// wraps ErrNotServed means the replica answered that it does not
	// hold the zone (yet). topo is what the answer is ordered for: this
	// process's own topology, which the replica asked follows, saying
	// how many records lead the answer as preferred for it (preferred,
	// as zone.Response.Preferred).
	Ask func(ctx context.Context, member, zoneKey, name string, qtype uint16, topo zone.Topology) (m *dns.Msg, preferred int, err error)
	// AskFor is Ask for a client pod of namespace ns: the owner answers
	// with the mesh hosts exported to ns alone too (zone.Response's
	// Private). Nil: such names are not asked (SERVFAIL).
	AskFor func(ctx context.Context, member, zoneKey, name string, qtype uint16, topo zone.Topology, ns string) (m *dns.Msg, preferred int, err error)
	// Cache holds owners' answers, bounded in size and by their TTLs.
	Cache *cache.Cache
	// Timeout bounds one attempt; Attempts bounds the owners asked in
	// one round.
	Timeout  time.Duration
	Attempts int
	// Budget bounds the question, every attempt together
	// (cluster.questionTimeout): past it the question is answered from
	// Cache, stale if need be, or SERVFAIL. 0: Attempts × Timeout.
	Budget time.Duration
	// MaxInFlight bounds questions being asked; beyond it, SERVFAIL.
	MaxInFlight int64
	Now         func() time.Time
	// Observe is told how each attempt at member went (for metrics); may
	// be nil.
	Observe func(member string, took time.Duration, err error)
	// CacheResult is told whether the owners' cache answered ("hit") or
	// not ("miss"); may be nil.
	CacheResult func(result string)
	// Fresh is what the owners said changed (coherence.go), shared by
	// every owners' cache of the process; nil: answers are kept by their
	// TTLs alone.
	Fresh *Freshness

	inflight atomic.Int64
}

// WithCache is a Cluster asking the owners as c does, with cc as its
// cache of their answers: a server block's own, as each block of a
// Corefile caches in its own cache plugin. It bounds its own questions in
// flight, as each block's forward does.
func (c *Cluster) WithCache(cc *cache.Cache) *Cluster {
	return &Cluster{Ask: c.Ask, AskFor: c.AskFor, Cache: cc, Timeout: c.Timeout, Attempts: c.Attempts, Budget: c.Budget,
		MaxInFlight: c.MaxInFlight, Now: c.Now, Observe: c.Observe, CacheResult: c.CacheResult, Fresh: c.Fresh}
}

// store caches m, an owner's answer to a question sent at asked with
// its preferred records first, and returns it as a cache hit would
// answer it (cache.PutAsHit). It is stored as of asked: an owner's word
// that the name changed, arriving while the question was in flight,
// outdates it (coherence.go).
func (c *Cluster) store(key cache.Key, m *dns.Msg, preferred int, asked time.Time) *dns.Msg {
	m, _ = c.Cache.PutPreferredAsHit(key, m, preferred, asked)
	return m
}

// ErrNotServed is what Cluster.Ask wraps when the replica asked does not
// hold the zone.
var ErrNotServed = errors.New("query: the replica asked does not hold the zone")

// remote answers a name whose zone is held elsewhere.
func (h *Handler) remote(x *exchange, r *dns.Msg, name string, resp zone.Response, out []byte) []byte {
	c := h.Cluster
	q := x.req.Question[0]
	key := cache.Key{Name: name, Type: q.Qtype, Class: q.Qclass}
	// A namespace's own answer is never cached by name: another
	// namespace's client would get it.
	if m, preferred, st := c.cached(key, resp.Zone); st == cache.Fresh && !resp.Private {
		c.count("hit")
		return h.answerFromOwner(x, r, name, m, preferred, out)
	}
	c.count("miss")
	if x.t.Late == nil || c.inflight.Add(1) > c.MaxInFlight {
		if x.t.Late != nil {
			c.inflight.Add(-1)
		}
		r.Rcode = dns.RcodeServerFailure
		return h.pack(x, r, out)
	}
	go func() {
		defer c.inflight.Add(-1)
		var b []byte
		if resp.FanOut {
			b = h.askAll(x, r.Copy(), name, key, resp, time.Now().Add(time.Duration(c.Attempts)*c.Timeout))
		} else {
			b = h.askOwners(x, r.Copy(), name, key, resp)
		}
		if b != nil {
			x.t.Late.WriteLate(b, x.t.Client)
		} // else the forwarder answers late itself
	}()
	return nil
}

// askOwners asks the first Attempts replicas of resp.Remote in turn,
// sharing the question's budget among them (attemptTimeout), and answers
// x with the first answer. When none answered (or there was none to ask:
// the zone is loading here, and no other replica serves it), it waits a
// little and answers the question from the view again: the zone may have
// moved meanwhile (this replica or another found its owner gone and took
// it over), or finished loading here or on a replica that said it does
// not hold it yet. A replica that did not answer at all is not asked
// again. Past the budget the question is answered stale or SERVFAIL
// (answerUnowned): a client that waits its whole timeout for nothing
// retries later than one told to. It returns nil when the forwarder
// answers late.
func (h *Handler) askOwners(x *exchange, r *dns.Msg, name string, key cache.Key, resp zone.Response) []byte {
	c := h.Cluster
	qtype := x.req.Question[0].Qtype
	deadline := time.Now().Add(c.budget())
	silent := map[string]bool{}
	pause := min(c.Timeout, c.budget()) / 10
	for {
		owners := resp.Remote[:min(len(resp.Remote), c.Attempts)]
		for i, member := range owners {
			wait := attemptTimeout(time.Until(deadline), c.Timeout, owners[i:], silent)
			if silent[member] || wait <= 0 {
				continue
			}
			asked := c.Now()
			m, preferred, err := c.ask(member, resp.Zone, name, qtype, h.Config.OwnTopology(), wait, privateTo(x, resp))
			if err == nil {
				if !resp.Private {
					m = c.store(key, m, preferred, asked)
				}
				return h.answerFromOwner(x, r, name, m, preferred, nil)
			}
			if !errors.Is(err, ErrNotServed) {
				silent[member] = true
			}
		}
		if time.Until(deadline) <= pause {
			break
		}
		time.Sleep(pause)
		pause = min(2*pause, c.Timeout)
		next := zone.Answer(h.Config, h.Zones, zone.Question{Name: name, Type: qtype, Namespace: x.meshNS})
		switch {
		case next.FanOut:
			// The reverse zones became partial meanwhile: the name's
			// answer is every replica's share, asked in the time left.
			return h.askAll(x, r, name, key, next, deadline)
		case len(next.Remote) > 0:
			resp = next
		case next.External || (next.Rcode == dns.RcodeNameError && h.fallsThrough(name)):
			return h.forward(x, r, name, "", nil)
		case next.Rcode == dns.RcodeServerFailure:
			resp = next // no replica can serve the zone yet: look again later
		default:
			return h.answerHere(x, r, name, next, nil) // the zone is held here now
		}
	}
	return h.answerUnowned(x, r, name, key, resp, "no owner of the zone answered", context.DeadlineExceeded)
}

// budget is how long a question asked of owners may take in all.
func (c *Cluster) budget() time.Duration {
	if c.Budget > 0 {
		return c.Budget
	}
	return time.Duration(c.Attempts) * c.Timeout
}

// attemptTimeout is how long the first of owners may take to answer:
// an equal share of what is left of the question's budget among those
// not found silent, at most one attempt's timeout, so that a silent
// first owner leaves the next one time to answer.
func attemptTimeout(left, timeout time.Duration, owners []string, silent map[string]bool) time.Duration {
	n := 0
	for _, m := range owners {
		if !silent[m] {
			n++
		}
	}
	if n == 0 || left <= 0 {
		return 0
	}
	return min(timeout, left/time.Duration(n))
}

// answerUnowned answers x when no owner answered within the question's
// budget: with the owners' answer Cache still holds, fresh (another
// question stored it meanwhile) or else stale (RFC 8767), marked with the
// extended error Stale Answer; failing that, SERVFAIL. An answer an owner
// said is outdated is gone from the cache, so it is never the one given.
// A namespace's own answer is never cached, so never served stale.
func (h *Handler) answerUnowned(x *exchange, r *dns.Msg, name string, key cache.Key, resp zone.Response, why string, err error) []byte {
	c := h.Cluster
	if m, preferred, st := c.cached(key, resp.Zone); st != cache.Miss && !resp.Private {
		if st == cache.Stale {
			h.countCache("stale")
			x.ede = &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeStaleAnswer}
		}
		return h.answerFromOwner(x, r, name, m, preferred, nil)
	}
	h.logError(x, why, err)
	r.Rcode = dns.RcodeServerFailure
	return h.pack(x, r, nil)
}

// askAll answers a name of a partial reverse zone that is not held here:
// each member of resp.Remote holds the share of the zone built from its
// own namespaces, so all are asked at once, each once until deadline (at
// most the question's budget from now), and x is answered with the merge
// of their answers (mergeShares), or as answerUnowned does when a share
// is missing. Asking a silent member again would only spend the budget
// the others' answers need; the merge already refuses to deny a name
// whose share is unknown. It returns nil when the forwarder answers late.
func (h *Handler) askAll(x *exchange, r *dns.Msg, name string, key cache.Key, resp zone.Response, deadline time.Time) []byte {
	c := h.Cluster
	qtype := x.req.Question[0].Qtype
	if bound := time.Now().Add(c.budget()); bound.Before(deadline) {
		deadline = bound
	}
	shares := make([]share, len(resp.Remote))
	asked := c.Now()
	if left := time.Until(deadline); left > 0 {
		var wg sync.WaitGroup
		for i, member := range resp.Remote {
			wg.Go(func() {
				m, _, err := c.ask(member, resp.Zone, name, qtype, h.Config.OwnTopology(), min(c.Timeout, left), "")
				shares[i] = share{member: member, msg: m, err: err} // reverse zones: nothing preferred
			})
		}
		wg.Wait()
	} else {
		for i, member := range resp.Remote {
			shares[i] = share{member: member, err: context.DeadlineExceeded}
		}
	}
	m, err := mergeShares(name, qtype, shares)
	if err != nil {
		return h.answerUnowned(x, r, name, key, resp, "not every replica holding a share of the reverse zone answered", err)
	}
	return h.answerFromOwner(x, r, name, c.store(key, m, 0, asked), 0, nil)
}

// share is one member's answer to a fan-out: a message, or why there is
// none.
type share struct {
	member string
	msg    *dns.Msg
	err    error
}

// mergeShares merges the members' answers for a name of a partial reverse
// zone. A member that does not serve the zone (one whose reverse zones
// are whole but not its to hold) adds nothing. Records found by any
// member are the answer, all of them: a name may point into namespaces
// held by different replicas. Failing that, a NODATA from one member says
// the name exists. NXDOMAIN needs every member's word, since any silent
// one may hold the name: without it the error says whose share is
// unknown, for a SERVFAIL.
func mergeShares(name string, qtype uint16, shares []share) (*dns.Msg, error) {
	var answer, extra []dns.RR
	var nodata, nxdomain *dns.Msg
	var unknown []error
	for _, s := range shares {
		switch {
		case errors.Is(s.err, ErrNotServed):
			continue
		case s.err != nil:
			unknown = append(unknown, fmt.Errorf("%s: %w", s.member, s.err))
			continue
		case s.msg == nil:
			unknown = append(unknown, fmt.Errorf("%s: no message", s.member))
			continue
		}
		switch s.msg.Rcode {
		case dns.RcodeSuccess:
			answer = appendNew(answer, s.msg.Answer)
			extra = appendNew(extra, s.msg.Extra)
			if nodata == nil {
				nodata = s.msg
			}
		case dns.RcodeNameError:
			if nxdomain == nil {
				nxdomain = s.msg
			}
		default:
			// SERVFAIL (a replica not synced yet) or worse: its share is
			// not known.
			unknown = append(unknown, fmt.Errorf("%s: %s", s.member, dns.RcodeToString[s.msg.Rcode]))
		}
	}
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Response, m.Authoritative = true, true
	switch {
	case len(answer) > 0:
		m.Answer, m.Extra = answer, extra
	case nodata != nil:
		m.Ns = nodata.Ns
	case nxdomain != nil && len(unknown) == 0:
		m.Rcode, m.Ns = dns.RcodeNameError, nxdomain.Ns
	case len(unknown) > 0:
		return nil, errors.Join(unknown...)
	default:
		return nil, fmt.Errorf("no replica serves the zone: %w", ErrNotServed)
	}
	return m, nil
}

// appendNew appends the records of rrs that dst does not hold yet (TTLs
// aside, as dns.IsDuplicate compares them), and no OPT: the members'
// replies carry their own, and the client's reply gets one of its own.
func appendNew(dst, rrs []dns.RR) []dns.RR {
	for _, rr := range rrs {
		if rr.Header().Rrtype == dns.TypeOPT {
			continue
		}
		dup := false
		for _, have := range dst {
			if dns.IsDuplicate(have, rr) {
				dup = true
				break
			}
		}
		if !dup {
			dst = append(dst, rr)
		}
	}
	return dst
}

// ask asks member once, for at most timeout, for a client of namespace
// ns ("": the answer every namespace gets).
func (c *Cluster) ask(member, zoneKey, name string, qtype uint16, topo zone.Topology, timeout time.Duration, ns string) (m *dns.Msg, preferred int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	switch {
	case ns == "":
		m, preferred, err = c.Ask(ctx, member, zoneKey, name, qtype, topo)
	case c.AskFor == nil:
		err = errors.New("query: no way to ask owners for a namespace")
	default:
		m, preferred, err = c.AskFor(ctx, member, zoneKey, name, qtype, topo, ns)
	}
	if c.Observe != nil {
		c.Observe(member, time.Since(start), err)
	}
	return m, preferred, err
}

func (c *Cluster) count(result string) {
	if c.CacheResult != nil {
		c.CacheResult(result)
	}
}

// answerFromOwner answers x from an owner's (or cached) answer m, whose
// first preferred records were preferred for this process's zone. An
// NXDOMAIN in a fallthrough zone goes to the forwarder, as it does when
// answered locally: a reverse name no owner knows (a node-local cache
// asks owners for every reverse zone) may be known upstream. It returns
// nil when the forwarder will answer late.
func (h *Handler) answerFromOwner(x *exchange, r *dns.Msg, name string, m *dns.Msg, preferred int, out []byte) []byte {
	if x.fed != nil && m.Rcode == dns.RcodeNameError {
		return h.answerFederated(x, r, out)
	}
	if m.Rcode == dns.RcodeNameError && h.fallsThrough(name) {
		return h.forward(x, r, name, "", out)
	}
	return h.packOwner(x, r, name, m, preferred, out)
}

// packOwner packs an owner's (or cached) answer for name as the answer to x.
func (h *Handler) packOwner(x *exchange, r *dns.Msg, name string, m *dns.Msg, preferred int, out []byte) []byte {
	h.setAnswer(x, r, name, x.req.Question[0].Name, ownerResponse(m, preferred))
	if b, done := h.chaseExternal(x, r, name, out); done {
		return b
	}
	return h.pack(x, r, out)
}
