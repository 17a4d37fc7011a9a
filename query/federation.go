package query

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/zone"
)

// Federation answers the names of Kubernetes cluster federations, as
// kube-dns did and CoreDNS's federation plugin does. The federation label
// is the one before the last below the cluster domain:
// svc.ns.FED.svc.<zone> is answered as svc.ns.svc.<zone> when that name
// exists here (with the asked name as the owner), and otherwise with a
// CNAME to svc.ns.FED.svc.<node zone>.<node region>.<federation domain>,
// the name another cluster of the federation publishes it under.
type Federation struct {
	// Zones are the cluster domains whose names may carry a federation
	// label, fully qualified and lower case.
	Zones []string
	// Domains maps each federation's name to its domain (fully qualified).
	Domains map[string]string
	// Upstream also resolves the CNAME target through the forwarder and
	// answers with both.
	Upstream bool

	locality atomic.Pointer[Locality]
}

// Locality is the failure domain of the node this process runs on, from
// its Node's topology labels.
type Locality struct {
	Zone, Region string
}

// SetLocality sets the node's zone and region; until it is set, a name
// that needs a CNAME gets SERVFAIL (CoreDNS fails the same way when the
// node lacks the labels).
func (f *Federation) SetLocality(l Locality) { f.locality.Store(&l) }

// errNoLocality is logged for a federation CNAME asked before the node's
// zone and region are known.
var errNoLocality = errors.New("federation: the zone and region labels of this node are not known (yet)")

// federated is a question whose federation label was taken out.
type federated struct {
	asked   string // the name as asked (after rewrites), in the client's case
	without string // the name answered here, lower case
	target  string // the CNAME target's name without its locality and domain: svc.ns.FED.svc.
	domain  string // the federation's domain
	chased  string // the CNAME target being resolved upstream, if any
}

// federationName is a name split around its federation label, every
// part a substring of the name.
type federationName struct {
	zone   string // the federation zone it lies in
	rel    string // the name relative to it: "svc.ns.fed.svc."
	front  string // the labels before the federation's: "svc.ns."
	last   string // the label after it: "svc"
	domain string // the federation's domain
}

// split reports, without allocating, whether name (lower case) lies in a
// federation zone with a federation's name as the label before the
// last, and returns its parts.
func (f *Federation) split(name string) (federationName, bool) {
	for _, z := range f.Zones {
		if !zone.InZone(name, z) || len(name) == len(z) {
			continue
		}
		rel := zone.Relative(name, z)
		last, rest := zone.LastLabel(rel)
		label, front := zone.LastLabel(rest)
		if domain, found := f.Domains[label]; found && rest != "" {
			return federationName{zone: z, rel: rel, front: front, last: last, domain: domain}, true
		}
	}
	return federationName{}, false
}

// match is split's answer as a question to answer without the label.
func (f *Federation) match(name string) (federated, bool) {
	n, ok := f.split(name)
	if !ok {
		return federated{}, false
	}
	return federated{without: zone.Join(n.front+n.last+".", n.zone), target: n.rel, domain: n.domain}, true
}

// claims reports, without allocating, whether name is a federation name,
// so the fast path leaves it to the full one.
func (f *Federation) claims(name string) bool {
	_, ok := f.split(name)
	return ok
}

// federate takes the federation label out of the question of x when it
// has one: everything after it answers the name without the label, and
// pack gives the client back the name it asked. It returns the name to
// answer.
func (h *Handler) federate(x *exchange, name string) string {
	fed, ok := h.Federation.match(name)
	if !ok {
		return name
	}
	q := &x.req.Question[0]
	fed.asked = q.Name
	x.fed = &fed
	q.Name = fed.without
	return fed.without
}

// answerFederated answers x, whose name without the federation label does
// not exist here, with the CNAME to where the federation publishes it
// (and, with Upstream, the target's records).
func (h *Handler) answerFederated(x *exchange, r *dns.Msg, out []byte) []byte {
	l := h.Federation.locality.Load()
	if l == nil {
		h.logError(x, "federation", errNoLocality)
		r.Rcode = dns.RcodeServerFailure
		return h.pack(x, r, out)
	}
	target := x.fed.target + l.Zone + "." + l.Region + "." + x.fed.domain
	r.Rcode = dns.RcodeSuccess
	r.Authoritative, r.RecursionAvailable = true, false
	// TTL 0, as CoreDNS: the name may exist here as soon as its service
	// does, and a cached CNAME would hide it.
	r.Answer = []dns.RR{&dns.CNAME{Hdr: dns.RR_Header{Name: x.fed.asked, Rrtype: dns.TypeCNAME, Class: dns.ClassINET},
		Target: target}}
	r.Ns, r.Extra = nil, nil
	if h.Federation.Upstream && h.Upstream != nil && x.req.Question[0].Qtype != dns.TypeCNAME {
		x.fed.chased = target
		return h.forward(x, r, target, "", out)
	}
	return h.pack(x, r, out)
}

// packFederatedUpstream answers x with the federation CNAME already in r,
// followed by the upstream's answer for its target when it has one; the
// CNAME alone otherwise, as CoreDNS's upstream option does.
func (h *Handler) packFederatedUpstream(x *exchange, r, reply *dns.Msg, out []byte) []byte {
	if reply.Rcode == dns.RcodeSuccess && len(reply.Answer) > 0 {
		r.Answer = append(slices.Clip(r.Answer), reply.Answer...)
	}
	return h.pack(x, r, out)
}

// unfederate gives the client back the name it asked in the answer
// section of r: owners that are the name without the federation label.
// The section may be a snapshot's: it is copied, never written.
func (x *exchange) unfederate(r *dns.Msg) {
	if x.fed == nil {
		return
	}
	copied := false
	for i, rr := range r.Answer {
		if !strings.EqualFold(rr.Header().Name, x.fed.without) {
			continue
		}
		if !copied {
			r.Answer, copied = slices.Clone(r.Answer), true
		}
		rr = dns.Copy(rr)
		rr.Header().Name = x.fed.asked
		r.Answer[i] = rr
	}
}
