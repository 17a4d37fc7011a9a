package query

import (
	"github.com/miekg/dns"

	"github.com/shardns/shardns/expression"
)

// View is a resolver plane that answers the queries its conditions hold
// for, in place of the handler that lists it (CoreDNS's view plugin: a
// server block of the same zone and port tried before the unfiltered
// one).
type View struct {
	Name       string
	Conditions []*expression.Condition // all must hold
	// Handler answers the view's queries: its own rewrite rules,
	// templates, hosts, ACL and upstreams, and the zones, cluster and
	// metrics of the handler that lists it. It has no views of its own.
	Handler *Handler
}

// pickView returns the handler of the first view whose conditions hold
// for req, or nil when none does (or req does not unpack: the full path
// answers it FORMERR).
func (h *Handler) pickView(req []byte, t Transport) *Handler {
	m := new(dns.Msg)
	if m.Unpack(req) != nil || len(m.Question) != 1 {
		return nil
	}
	r := exprRequest(m, len(req), t)
	for i := range h.Views {
		if expression.All(h.Views[i].Conditions, r) {
			return h.Views[i].Handler
		}
	}
	return nil
}

// exprRequest is the request m, of size bytes, as expressions (views,
// templates' vars and conditions) see it.
func exprRequest(m *dns.Msg, size int, t Transport) *expression.Request {
	q := m.Question[0]
	r := &expression.Request{Name: lower(q.Name), Type: q.Qtype, Class: q.Qclass, ID: m.Id, Opcode: m.Opcode,
		Size: size, TCP: t.TCP, Client: t.Client, Server: t.Server}
	if opt := m.IsEdns0(); opt != nil {
		r.Do, r.UDPSize = opt.Do(), opt.UDPSize()
	}
	return r
}
