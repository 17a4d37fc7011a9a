package query

import (
	"net/netip"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardns/shardns/template"
)

// maxChaseDepth bounds how deep CNAME targets of templated answers are
// looked up through the handler again: a template whose CNAME leads to a
// name another template answers with a CNAME could go round forever.
const maxChaseDepth = 8

// answerTemplate answers the question of x from the templates, after the
// rewrite rules and before the transfers, hosts and zones, as CoreDNS's
// plugin order has it; done is false when no template decides the
// question.
func (h *Handler) answerTemplate(x *exchange, r *dns.Msg, name string, out []byte) (b []byte, done bool) {
	q := x.req.Question[0]
	resp := h.Template.Answer(template.Question{Msg: x.req, Name: name, Remote: remoteIP(x.t.Client),
		Request: exprRequest(x.req, x.reqSize, x.t)})
	h.countTemplate(resp)
	switch resp.Verdict {
	case template.Pass:
		return nil, false
	case template.Failed:
		if resp.Err != nil {
			h.logError(x, "template", resp.Err)
		}
		r.Rcode = dns.RcodeServerFailure
		return h.pack(x, r, out), true
	}
	if !resp.Chases(q.Qtype) || x.t.chaseDepth >= maxChaseDepth {
		return h.packTemplated(x, r, resp, false, out), true
	}
	if x.t.Late == nil || x.t.chaseDepth > 0 {
		// No later write to make, or a lookup already on its own
		// goroutine: look the targets up in place.
		truncated := resp.Chase(func(target string) *dns.Msg { return h.lookup(x, target) })
		return h.packTemplated(x, r, resp, truncated, out), true
	}
	// A target may be forwarded: look it up on a goroutine of its own, as
	// forward does, so that a slow upstream never holds a listener.
	go func() {
		truncated := resp.Chase(func(target string) *dns.Msg { return h.lookup(x, target) })
		x.t.Late.WriteLate(h.packTemplated(x, r, resp, truncated, nil), x.t.Client)
	}()
	return nil, true
}

// packTemplated packs a templated answer as CoreDNS writes it:
// authoritative, with the template's rcode and sections.
func (h *Handler) packTemplated(x *exchange, r *dns.Msg, resp template.Response, truncated bool, out []byte) []byte {
	r.Authoritative = true
	r.Truncated = truncated
	r.Rcode = resp.Rcode
	r.Answer, r.Ns, r.Extra = resp.Answer, resp.Ns, resp.Extra
	if h.LoadBalance {
		r.Answer = shuffled(r.Answer)
	}
	x.ede = resp.ExtendedError
	return h.pack(x, r, out)
}

// lookup asks this handler for target, with the type, class and EDNS0
// of the request of x, as CoreDNS's upstream lookup asks its own server:
// the rewrite rules, templates, hosts, zones and forwarder all apply.
// It returns nil when nothing answered in time.
func (h *Handler) lookup(x *exchange, target string) *dns.Msg {
	return h.lookupType(x, target, x.req.Question[0].Qtype)
}

// lookupType is lookup for a type of its own.
func (h *Handler) lookupType(x *exchange, target string, qtype uint16) *dns.Msg {
	req := x.req.Copy()
	req.Question[0] = dns.Question{Name: dns.Fqdn(target), Qtype: qtype, Qclass: dns.ClassINET}
	wire, err := req.Pack()
	if err != nil {
		return nil
	}
	late := make(lateReply, 1)
	t := Transport{TCP: x.t.TCP, IPv6: x.t.IPv6, Client: x.t.Client, Late: late, chaseDepth: x.t.chaseDepth + 1}
	b := h.Serve(wire, t, nil)
	if b == nil {
		select {
		case b = <-late:
		case <-time.After(max(h.LateBound(), time.Second)):
			return nil
		}
	}
	m := new(dns.Msg)
	if m.Unpack(b) != nil {
		return nil
	}
	return m
}

// countTemplate counts what the templates did with a question, as
// CoreDNS's template metrics do: a match, and a record template that
// failed to execute or made no valid record.
func (h *Handler) countTemplate(resp template.Response) {
	if h.Metrics == nil || h.Metrics.Template == nil || resp.Match.Zone == "" {
		return
	}
	m, l := h.Metrics.Template, resp.Match
	m.Matches.WithLabelValues(h.Server, l.Zone, h.ViewName, l.Class, l.Type).Inc()
	if f := resp.Failure; f != nil {
		failures := m.TemplateFailures
		if f.RR {
			failures = m.RRFailures
		}
		failures.WithLabelValues(h.Server, l.Zone, h.ViewName, l.Class, l.Type, f.Section, f.Template).Inc()
	}
}

// countBare counts a match answered on the fast path; the counter of
// each match is kept, so that it allocates nothing.
func (h *Handler) countBare(match template.Match) {
	if h.Metrics == nil || h.Metrics.Template == nil {
		return
	}
	c, ok := h.templateMatches.Load(match)
	if !ok {
		c, _ = h.templateMatches.LoadOrStore(match,
			h.Metrics.Template.Matches.WithLabelValues(h.Server, match.Zone, h.ViewName, match.Class, match.Type))
	}
	c.(prometheus.Counter).Inc()
}

// lateReply receives the answer of a lookup that is answered late.
type lateReply chan []byte

func (l lateReply) WriteLate(b []byte, _ netip.AddrPort) { l <- b }

// remoteIP is the client's address as a template's .Remote shows it.
func remoteIP(client netip.AddrPort) string {
	if !client.IsValid() {
		return ""
	}
	return client.Addr().Unmap().String()
}
