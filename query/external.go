package query

import (
	"github.com/miekg/dns"

	"github.com/shardns/shardns/zone"
)

// chaseExternal completes r, the answer to x for name from an external
// (k8s_external) zone, with the records of the load balancer hostnames
// its CNAME or SRV records name, looked up through this handler as
// k8s_external's upstream asks its own server, and packs it; done is
// false when r names none. The owner's answer, cached or not, is never
// written: the chase makes new sections.
func (h *Handler) chaseExternal(x *exchange, r *dns.Msg, name string, out []byte) (b []byte, done bool) {
	qtype := x.req.Question[0].Qtype
	if x.t.chaseDepth >= maxChaseDepth || !h.Config.ExternalChases(name, qtype, r.Answer) {
		return nil, false
	}
	chase := func() {
		var truncated bool
		r.Answer, r.Extra, truncated = zone.ChaseExternal(h.Config.ExternalZone(name), qtype, r.Answer, r.Extra,
			func(target string, t uint16) *dns.Msg { return h.lookupType(x, target, t) })
		r.Truncated = r.Truncated || truncated
	}
	if x.t.Late == nil || x.t.chaseDepth > 0 {
		// No later write to make, or a lookup already on its own
		// goroutine: look the hostnames up in place.
		chase()
		return h.pack(x, r, out), true
	}
	// The hostnames are forwarded: look them up on a goroutine of their
	// own, so that a slow upstream never holds a listener.
	go func() {
		chase()
		x.t.Late.WriteLate(h.pack(x, r, nil), x.t.Client)
	}()
	return nil, true
}
