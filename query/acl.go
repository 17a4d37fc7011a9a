package query

import (
	"github.com/miekg/dns"

	"github.com/shardns/shardns/acl"
)

// applyACL answers x as the access lists decide, before anything else
// answers it (CoreDNS's acl comes before chaos, cache and rewrite). It
// returns done when the lists refused, filtered or dropped the question;
// b is nil for a drop.
func (h *Handler) applyACL(x *exchange, r *dns.Msg, out []byte) (b []byte, done bool) {
	q := x.req.Question[0]
	action, z := h.ACL.Check(lower(q.Name), q.Qtype, x.t.Client.Addr())
	h.countACL(action, z)
	switch action {
	case acl.Drop:
		if h.Metrics != nil {
			h.Metrics.DNS.Dropped.WithLabelValues(h.Server, "acl").Inc()
		}
		return nil, true
	case acl.Block:
		r.Rcode = dns.RcodeRefused
		x.ede = &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeBlocked}
	case acl.Filter:
		r.Rcode = dns.RcodeSuccess
		x.ede = &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeFiltered}
	default:
		return nil, false
	}
	// The reason travels as an extended DNS error (RFC 8914) to clients
	// that speak EDNS; the response has no records.
	return h.pack(x, r, out), true
}

// countACL counts what the access lists decided, under CoreDNS's names.
func (h *Handler) countACL(action acl.Action, zone string) {
	if h.Metrics == nil || h.Metrics.ACL == nil {
		return
	}
	m := h.Metrics.ACL
	switch action {
	case acl.Block:
		m.Blocked.WithLabelValues(h.Server, zone, h.ViewName).Inc()
	case acl.Filter:
		m.Filtered.WithLabelValues(h.Server, zone, h.ViewName).Inc()
	case acl.Drop:
		m.Dropped.WithLabelValues(h.Server, zone, h.ViewName).Inc()
	default:
		m.Allowed.WithLabelValues(h.Server, h.ViewName).Inc()
	}
}
