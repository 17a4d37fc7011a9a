package query

import (
	"strings"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/zone"
)

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
	client := x.t.Client.Addr().Unmap()
	ns, ok := h.Autopath.Namespace(client)
	if !ok {
		return nil, false
	}
	q := x.req.Question[0]
	for _, origin := range h.Config.Domains.Cluster {
		first := zone.Join(ns+".svc.", origin)
		if !strings.HasSuffix(name, "."+first) {
			continue
		}
		base := name[:len(name)-len(first)]
		first = name
		for _, cand := range []string{first, zone.Join(base+"svc.", origin), zone.Join(base, origin)} {
			resp := zone.Answer(h.Config, h.View, zone.Question{Name: cand, Type: q.Qtype})
			if len(resp.Remote) > 0 {
				return nil, false // held by another replica: the client walks its search path
			}
			if resp.External || resp.Rcode == dns.RcodeNameError || resp.Rcode == dns.RcodeServerFailure {
				continue
			}
			if cand == name {
				return nil, false // it exists as asked: the ordinary answer
			}
			h.countAutopath()
			h.setAnswer(x, r, cand, cand, resp)
			r.Answer = cnamed(r.Answer, q.Name)
			return h.pack(x, r, out), true
		}
		h.countAutopath()
		if h.Config.Domains.Route(base).Kind == zone.RouteExternal {
			return h.forward(x, r, base, q.Name, out), true
		}
		resp := zone.Answer(h.Config, h.View, zone.Question{Name: base, Type: q.Qtype})
		if resp.Rcode == dns.RcodeNameError {
			return nil, false
		}
		h.setAnswer(x, r, base, base, resp)
		r.Answer = cnamed(r.Answer, q.Name)
		return h.pack(x, r, out), true
	}
	return nil, false
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
