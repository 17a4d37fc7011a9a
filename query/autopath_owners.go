package query

import (
	"github.com/miekg/dns"

	"github.com/shardns/shardns/zone"
)

// walkOwners walks the rest of w asking the owners of each name (a
// node-local process holds no zone): the answer is written late. Owners'
// answers are cached as any other, so the NXDOMAINs of a namespace's
// search path are asked once per TTL, not once per client question.
func (h *Handler) walkOwners(x *exchange, r *dns.Msg, w *walk, out []byte) []byte {
	c := h.Cluster
	if c.inflight.Add(1) > c.MaxInFlight {
		c.inflight.Add(-1)
		r.Rcode = dns.RcodeServerFailure
		return h.pack(x, r, out)
	}
	go func() {
		defer c.inflight.Add(-1)
		if b := h.walkLate(x, r.Copy(), w); b != nil {
			x.t.Late.WriteLate(b, x.t.Client)
		} // else the forwarder answers late itself
	}()
	return nil
}

// walkLate is walkHere off the listener's goroutine, where owners may be
// asked. A name no owner answered fails the question (SERVFAIL, as the
// name asked alone would): guessing past it could answer a name the
// client would never have reached. It returns nil when the forwarder
// answers late.
func (h *Handler) walkLate(x *exchange, r *dns.Msg, w *walk) []byte {
	for _, cand := range w.cands {
		resp, ok := h.lookupAnywhere(x, cand)
		if !ok {
			r.Rcode = dns.RcodeServerFailure
			return h.pack(x, r, nil)
		}
		if b, done, ordinary := h.step(x, r, w, cand, resp, nil); done {
			return b
		} else if ordinary {
			return h.ordinaryLate(x, r, w.name, resp)
		}
	}
	if b, done := h.walkBase(x, r, w, nil); done {
		return b
	}
	// base is a cluster name: asked of its owners like the others.
	resp, ok := h.lookupAnywhere(x, w.base)
	if ok && resp.Rcode != dns.RcodeNameError && resp.Rcode != dns.RcodeServerFailure {
		h.setAnswer(x, r, w.base, w.base, resp)
		r.Answer = cnamed(r.Answer, x.req.Question[0].Name)
		return h.pack(x, r, nil)
	}
	resp, ok = h.lookupAnywhere(x, w.name)
	if !ok {
		r.Rcode = dns.RcodeServerFailure
		return h.pack(x, r, nil)
	}
	return h.ordinaryLate(x, r, w.name, resp)
}

// ordinaryLate answers name as if autopath did not exist.
func (h *Handler) ordinaryLate(x *exchange, r *dns.Msg, name string, resp zone.Response) []byte {
	if resp.External || (resp.Rcode == dns.RcodeNameError && h.fallsThrough(name)) {
		return h.forward(x, r, name, "", nil)
	}
	return h.answerHere(x, r, name, resp, nil)
}

// lookupAnywhere answers name from this view, or from the owners of its
// zone when it is held elsewhere; ok is false when no owner answered.
func (h *Handler) lookupAnywhere(x *exchange, name string) (zone.Response, bool) {
	q := x.req.Question[0]
	resp := zone.Answer(h.Config, h.Zones, zone.Question{Name: name, Type: q.Qtype})
	if len(resp.Remote) == 0 {
		return resp, true
	}
	if resp.FanOut {
		return zone.Response{}, false
	}
	m, preferred, err := h.Cluster.lookup(name, q.Qtype, resp, h.Config.OwnTopology())
	if err != nil {
		h.logError(x, "autopath: asking the owners of "+name, err)
		return zone.Response{}, false
	}
	return ownerResponse(m, preferred), true
}
