package query

import (
	"github.com/miekg/dns"

	"github.com/shardns/shardns/hosts"
)

// The resolver plane in front of the cluster zones, in CoreDNS's plugin
// order: chaos, rewrite, template (templated.go), hosts, then the zones
// (kubernetes) and the forwarder.

// Chaos answers CHAOS-class TXT questions about the server, as CoreDNS's
// chaos plugin does.
type Chaos struct {
	Version  string // version.bind and version.server
	Hostname string // hostname.bind and id.server
	// Authors are authors.bind's answer, one TXT record each; none
	// refuses the name, as any other.
	Authors []string
}

// chaos answers a CHAOS-class question: TXT at the four names it knows,
// NODATA for other types there, REFUSED for any other name.
func (h *Handler) chaos(x *exchange, r *dns.Msg, out []byte) []byte {
	q := x.req.Question[0]
	var txts []string
	switch lower(q.Name) {
	case "version.bind.", "version.server.":
		txts = []string{h.Chaos.Version}
	case "hostname.bind.", "id.server.":
		txts = []string{h.Chaos.Hostname}
	case "authors.bind.":
		txts = h.Chaos.Authors
	}
	if len(txts) == 0 {
		r.Rcode = dns.RcodeRefused
		return h.pack(x, r, out)
	}
	r.Authoritative = true
	if q.Qtype == dns.TypeTXT || q.Qtype == dns.TypeANY {
		for _, txt := range txts {
			r.Answer = append(r.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeTXT, Class: dns.ClassCHAOS},
				Txt: []string{txt}})
		}
	}
	return h.pack(x, r, out)
}

// rewriteQuestion applies the rewrite rules to the question of x, in
// place, as CoreDNS does: everything after it (hosts, zones, autopath,
// forwarder, caches) sees the rewritten question; pack gives the client
// back its own. It returns the name to answer, and false when a rule made
// a name that is not one (the caller answers SERVFAIL).
func (h *Handler) rewriteQuestion(x *exchange, name string) (string, bool) {
	q := &x.req.Question[0]
	res, ok, err := h.Rewrite.Apply(name, q.Qtype)
	if !ok {
		return name, true
	}
	if err != nil {
		h.logError(x, "rewrite", err)
		return name, false
	}
	x.rewrite = &res
	x.asked = *q
	q.Name, q.Qtype = res.Name, res.Type
	return res.Name, true
}

// unrewrite gives the client back the names it asked in r (whose question
// is already the asked one), and applies the TTL rules.
func (x *exchange) unrewrite(r *dns.Msg) {
	if x.rewrite == nil || len(r.Question) != 1 {
		return
	}
	asked := r.Question[0].Name
	r.Answer = x.rewrite.Section(r.Answer, asked)
	r.Ns = x.rewrite.Section(r.Ns, asked)
	r.Extra = x.rewrite.Section(r.Extra, asked)
}

// question is the question the client asked, for metrics and logs.
func (x *exchange) question() (dns.Question, bool) {
	if x.rewrite != nil {
		return x.asked, true
	}
	if len(x.req.Question) == 1 {
		return x.req.Question[0], true
	}
	return dns.Question{}, false
}

// answerHosts answers name from the hosts entries; done is false when the
// entries pass it on to the zones and the forwarder.
func (h *Handler) answerHosts(x *exchange, r *dns.Msg, name string, out []byte) (b []byte, done bool) {
	snap := h.Hosts.Snapshot()
	q := x.req.Question[0]
	rrs, verdict := snap.Lookup(name, q.Qtype)
	if verdict == hosts.Pass {
		return nil, false
	}
	x.zone = snap.Zone(name)
	if verdict == hosts.Fail {
		r.Rcode = dns.RcodeServerFailure
		return h.pack(x, r, out), true
	}
	r.Authoritative = true
	r.Answer = withOwnerCase(rrs, name, q.Name)
	if h.LoadBalance {
		r.Answer = shuffled(r.Answer)
	}
	return h.pack(x, r, out), true
}

// planeClaims reports whether the resolver plane handles the question
// itself (a rewrite rule, a template or a hosts entry applies), so the fast path,
// whose packed answers come from the zones alone, must leave it to the
// full path. It allocates nothing.
func (h *Handler) planeClaims(name string, qtype uint16) bool {
	if h.Rewrite != nil && h.Rewrite.Matches(name, qtype) {
		return true
	}
	if h.Federation != nil && h.Federation.claims(name) {
		return true
	}
	if h.Template != nil && h.Template.Claims(name, dns.ClassINET, qtype) {
		return true
	}
	if h.Hosts != nil {
		if _, v := h.Hosts.Snapshot().Lookup(name, qtype); v != hosts.Pass {
			return true
		}
	}
	return false
}
