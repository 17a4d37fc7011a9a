package query

import (
	"errors"
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/cache"
	"github.com/shardns/shardns/zone"
)

// ClientNamespaces tells autopath the namespace of the pod at a source
// address: a replica's index of every pod (pods verified), or a
// node-local process's directory of its node's pods.
type ClientNamespaces interface {
	Namespace(a netip.Addr) (string, bool)
}

// autopath answers, for a client pod of namespace N, a name of the form
// base.N.svc.<zone> — the first search-path expansion that ndots:5 makes
// of nearly every name — by walking the rest of the pod's search path on
// the server (base.svc.<zone>, base.<zone>, then base itself) and answering
// with a CNAME from the asked name to the first name that exists, as
// CoreDNS's autopath does. The client is spared the NXDOMAIN chain.
// It reports false when the request is not one for autopath.
func (h *Handler) autopath(x *exchange, r *dns.Msg, name string, out []byte) ([]byte, bool) {
	if !x.t.Client.IsValid() {
		return nil, false
	}
	ns, ok := h.Autopath.Namespace(x.t.Client.Addr().Unmap())
	if !ok {
		return nil, false
	}
	for _, origin := range h.Config.Domains.Cluster {
		first := zone.Join(ns+".svc.", origin)
		if !strings.HasSuffix(name, "."+first) {
			continue
		}
		base := name[:len(name)-len(first)]
		w := &walk{name: name, base: base, cands: []string{name, zone.Join(base+"svc.", origin), zone.Join(base, origin)}}
		return h.walkHere(x, r, w, out)
	}
	return nil, false
}

// walk is one search path being walked for a client.
type walk struct {
	name, base string
	cands      []string // the names to try before base, the asked one first
}

// walkHere walks the search path from this replica's own zones. At the
// first name whose zone is held elsewhere (every name, on a node-local
// process) the rest of the walk asks the owners, off the listener's
// goroutine, and the answer comes late; without a way to answer late the
// client walks its search path itself.
func (h *Handler) walkHere(x *exchange, r *dns.Msg, w *walk, out []byte) ([]byte, bool) {
	q := x.req.Question[0]
	for i, cand := range w.cands {
		resp := zone.Answer(h.Config, h.Zones, zone.Question{Name: cand, Type: q.Qtype})
		if len(resp.Remote) > 0 {
			if h.Cluster == nil || x.t.Late == nil || resp.FanOut {
				return nil, false
			}
			w.cands = w.cands[i:]
			return h.walkOwners(x, r, w, out), true
		}
		if b, done, ordinary := h.step(x, r, w, cand, resp, out); done || ordinary {
			return b, done
		}
	}
	return h.walkBase(x, r, w, out)
}

// step answers x if cand, whose answer is resp, ends the walk. ordinary
// reports that the asked name exists: its own answer is the one.
func (h *Handler) step(x *exchange, r *dns.Msg, w *walk, cand string, resp zone.Response, out []byte) (b []byte, done, ordinary bool) {
	if resp.External || resp.Rcode == dns.RcodeNameError || resp.Rcode == dns.RcodeServerFailure {
		return nil, false, false
	}
	if cand == w.name {
		return nil, false, true
	}
	h.countAutopath()
	h.setAnswer(x, r, cand, cand, resp)
	r.Answer = cnamed(r.Answer, x.req.Question[0].Name)
	return h.pack(x, r, out), true, false
}

// walkBase ends a walk in which no cluster name existed: base itself,
// from the upstreams or the cluster zones.
func (h *Handler) walkBase(x *exchange, r *dns.Msg, w *walk, out []byte) ([]byte, bool) {
	h.countAutopath()
	if h.Config.Domains.Route(w.base).Kind == zone.RouteExternal {
		return h.forward(x, r, w.base, x.req.Question[0].Name, out), true
	}
	resp := zone.Answer(h.Config, h.Zones, zone.Question{Name: w.base, Type: x.req.Question[0].Qtype})
	if resp.Rcode == dns.RcodeNameError || len(resp.Remote) > 0 {
		return nil, false
	}
	h.setAnswer(x, r, w.base, w.base, resp)
	r.Answer = cnamed(r.Answer, x.req.Question[0].Name)
	return h.pack(x, r, out), true
}

// cnamed puts a CNAME from the asked name to the name found in front of
// the answer, unless the answer is empty or already about the asked name.
func cnamed(answer []dns.RR, asked string) []dns.RR {
	if len(answer) == 0 || strings.EqualFold(answer[0].Header().Name, asked) {
		return answer
	}
	first := answer[0].Header()
	out := make([]dns.RR, 0, len(answer)+1)
	out = append(out, &dns.CNAME{Hdr: dns.RR_Header{Name: asked, Rrtype: dns.TypeCNAME, Class: dns.ClassINET, Ttl: first.Ttl},
		Target: first.Name})
	return append(out, answer...)
}

func (h *Handler) countAutopath() {
	if h.Metrics != nil {
		h.Metrics.DNS.Autopath.WithLabelValues(h.Server).Inc()
	}
}

// errNoOwnerAnswered is a lookup of the walk that no owner answered.
var errNoOwnerAnswered = errors.New("query: no owner of the zone answered")

// lookup answers name from the owners of its zone, or from their answer
// cached (ordered for topo, this process's own topology): the first of
// the first Attempts owners that answers, each given Timeout; preferred
// is how many records lead it as preferred for topo's zone.
func (c *Cluster) lookup(name string, qtype uint16, resp zone.Response, topo zone.Topology) (m *dns.Msg, preferred int, err error) {
	key := cache.Key{Name: name, Type: qtype, Class: dns.ClassINET}
	if h, st, _ := c.Cache.Peek(key, c.Now()); st == cache.Fresh {
		c.count("hit")
		return h.Copy(st), h.Entry.Preferred(), nil
	}
	c.count("miss")
	err = errNoOwnerAnswered
	for _, member := range resp.Remote[:min(len(resp.Remote), c.Attempts)] {
		m, preferred, e := c.ask(member, resp.Zone, name, qtype, topo, c.Timeout, "")
		if e == nil {
			c.Cache.PutPreferred(key, m, preferred, c.Now())
			return m, preferred, nil
		}
		err = e
	}
	return nil, 0, err
}
