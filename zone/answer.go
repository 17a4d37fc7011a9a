package zone

import (
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// Question is a lower-case, fully qualified name and a query type.
type Question struct {
	Name string
	Type uint16
	// LocalOnly answers from the state held here only: a name missing
	// from a partial reverse zone is a miss here, not a reason to send the
	// caller to the other replicas. A replica answering another's fan-out
	// sets it, so a fan-out never fans out again.
	LocalOnly bool
	// Asker, when another process asked (over the cluster), is what its
	// answer is ordered for (topology.go); nil: this process's own.
	Asker *Topology
	// Namespace is the client pod's, when the node tier knows it: mesh
	// hosts exported to that namespace only are answered too
	// (meshprivate.go). "": only those exported to every namespace.
	Namespace string
}

// Response is the outcome of Answer. Its records may share memory with the
// snapshot they came from (addresses, the SOA) and must not be modified.
type Response struct {
	External bool // not in any cluster or reverse zone, nor a mesh name: not ours to answer
	// Remote lists the replicas to ask, in order, when the zone is held
	// elsewhere; Zone is its key, "" for a pod name asked by a node that
	// does not know the namespaces (any replica answers it).
	Remote []string
	Zone   string
	// FanOut says Remote lists every other replica, each holding a share
	// of the partial reverse zone Zone: all are asked and their answers
	// merged, instead of the first that answers being the answer.
	FanOut bool
	Rcode  int
	// Wait says the zone (key Zone) is loading here and no other replica
	// can serve it: the question may wait for the load, a short while,
	// rather than fail at once (Rcode is SERVFAIL meanwhile).
	Wait bool
	// Referral is a delegation from a file zone: NS in the authority
	// section, glue in the additional one, and no AA bit.
	Referral bool
	// Private says the answer is the asking namespace's (a mesh host
	// exported to it alone, meshprivate.go): the owners are asked with
	// the namespace, and what they answer is never cached by name.
	Private bool
	// Preferred is how many records lead Answer because they were
	// preferred for the asker's zone (kubernetes.topology: prefer) with
	// others after them; 0 when the answer is not ordered so.
	// Loadbalance shuffles the addresses of the two runs apart, keeping
	// the preferred ones first.
	Preferred int
	Answer    []dns.RR
	Ns        []dns.RR
	Extra     []dns.RR
}

// Reader is the state a question is answered from: the replicated directory
// and the snapshots of the zones this node holds.
type Reader interface {
	Directory() *Directory
	// Zone returns the snapshot of zone key, or nil when no state is held.
	Zone(key string) *Snapshot
	// Remote lists, for a zone that exists but is not served here, the
	// replicas that hold it in the order to ask them; nil otherwise.
	Remote(key string) []string
	// Loading reports whether zone key is being loaded here (a ring change
	// gave it to this replica): hidden from queries until it is complete.
	Loading(key string) bool
	// FanOut is nil when reverse zones are held whole by their owners
	// (found through Remote). Otherwise the reverse zones here are partial,
	// or absent (a node-local cache): each replica builds them from the
	// objects of its own namespaces, so a reverse name of zone key that
	// is not held here must be asked of every member listed (never this
	// node) and their answers merged. It is only asked for reverse keys.
	FanOut(key string) []string
}

// maxCNAMEDepth bounds ExternalName chasing inside the cluster domain, as
// CoreDNS does.
const maxCNAMEDepth = 8

// Answer answers q from v. It is a pure function of its arguments; it
// allocates only the records it answers with, decoded from the zone's
// snapshot (node.go). A name outside the cluster and reverse zones is
// answered from the mesh zone of the ServiceEntry host it matches, else
// it is External.
func Answer(cfg *Config, v Reader, q Question) Response {
	return answer(cfg, v, q, 0)
}

func answer(cfg *Config, v Reader, q Question, depth int) Response {
	route := cfg.Domains.Route(q.Name)
	if route.Kind == RouteExternal {
		if key := cfg.FileOrigin(v.Directory(), q.Name); key != "" {
			return answerFile(v, key, q)
		}
		return answerMesh(cfg, v, q)
	}
	dir := v.Directory()
	if q.Type == dns.TypeAXFR || q.Type == dns.TypeIXFR {
		return Response{Rcode: dns.RcodeRefused}
	}
	var r Response
	switch {
	case route.External && !route.Reverse:
		r = answerExternal(cfg, v, dir, route, q)
	case route.Multicluster && route.Kind == RouteZone:
		r = answerMulticluster(cfg, v, dir, route, q)
	case route.Kind == RouteApex:
		r = answerApex(cfg, dir, route.Origin, q)
	case route.Kind == RouteReverseApex:
		switch z := cfg.externalReverseZone(route, q.Name); {
		case q.Name == route.Origin:
			r = answerApex(cfg, dir, route.Origin, q)
		case z != "": // passed on to k8s_external, a name of its zone
			r = answerExternal(cfg, v, dir, cfg.Domains.routeExternal(q.Name, z), q)
		default:
			r = negative(dns.RcodeNameError, dir.soa[route.Origin])
		}
	case route.Kind == RouteStateless:
		r = answerStateless(cfg, v, dir, route.Origin, q)
	case route.Kind == RouteZone:
		r = answerZone(cfg, v, dir, route, q, depth)
	}
	if r.Rcode == dns.RcodeNameError && !dir.Synced {
		// Before the first sync a missing name may just not be loaded yet:
		// never hand out a false NXDOMAIN.
		return Response{Rcode: dns.RcodeServerFailure}
	}
	return r
}

func negative(rcode int, soa []dns.RR) Response {
	return Response{Rcode: rcode, Ns: soa}
}

func answerApex(cfg *Config, dir *Directory, origin string, q Question) Response {
	switch q.Type {
	case dns.TypeSOA:
		return Response{Answer: dir.soa[origin]}
	case dns.TypeNS:
		ap := cfg.apex[origin]
		return Response{Answer: ap.ns, Extra: ap.nsExtra}
	}
	return negative(dns.RcodeSuccess, dir.soa[origin])
}

// answerStateless answers the names of a cluster domain that hold no zone
// state: svc., pod names, dns-version and ns.dns.
func answerStateless(cfg *Config, v Reader, dir *Directory, origin string, q Question) Response {
	soa := dir.soa[origin]
	rel := Relative(q.Name, origin)
	switch rel {
	case "dns-version.":
		if q.Type == dns.TypeTXT {
			return Response{Answer: cfg.apex[origin].version}
		}
		return negative(dns.RcodeSuccess, soa)
	case "ns.dns.":
		ap := cfg.apex[origin]
		if q.Type == dns.TypeA && len(ap.nsA) > 0 {
			return Response{Answer: ap.nsA}
		}
		if q.Type == dns.TypeAAAA && len(ap.nsAAAA) > 0 {
			return Response{Answer: ap.nsAAAA}
		}
		return negative(dns.RcodeSuccess, soa)
	case "svc.", "pod.":
		return negative(dns.RcodeSuccess, soa)
	}
	last, rest := lastLabel(rel)
	if last != "pod" {
		return negative(dns.RcodeNameError, soa)
	}
	return answerPod(cfg, v, dir, q, rest, soa)
}

// answerPod answers <dashed-ip>.<ns>.pod.<zone> in insecure mode: any
// well-formed IP in an existing namespace.
func answerPod(cfg *Config, v Reader, dir *Directory, q Question, rel string, soa []dns.RR) Response {
	ns, rest := lastLabel(rel)
	if cfg.Pods == PodsDisabled || cfg.Pods == PodsVerified {
		// Verified pod names of a cluster domain go to its pod zones; only
		// a multicluster zone's come here, and it holds no pods.
		return negative(dns.RcodeNameError, soa)
	}
	if cfg.Pods == PodsDisabled {
		return negative(dns.RcodeNameError, soa)
	}
	// The map is read as HasNamespace reads it, so a replica pays nothing
	// for the unknown-namespaces case below.
	if _, ok := dir.Namespaces[ns]; !ok {
		if dir.AnyNamespace {
			return askPodName(v, q.Name[len(rest):])
		}
		return negative(dns.RcodeNameError, soa)
	}
	if rest == "" {
		return negative(dns.RcodeSuccess, soa)
	}
	label, deeper := lastLabel(rest)
	if deeper != "" {
		return negative(dns.RcodeNameError, soa)
	}
	ip, ok := podIP(label)
	if !ok {
		return negative(dns.RcodeNameError, soa)
	}
	if (q.Type == dns.TypeA && ip.Is4()) || (q.Type == dns.TypeAAAA && ip.Is6()) {
		return Response{Answer: []dns.RR{addrRR(q.Name, ip, cfg.TTL)}}
	}
	return negative(dns.RcodeSuccess, soa)
}

// askPodName sends a pod name to the replicas when this node does not
// know the namespaces (a node-local cache): whether the namespace exists,
// and so the answer, is theirs to say. Any replica answers the name from
// its directory, so it goes with no zone key (the key a replica computes
// for it, which its dispatch server checks); key, the namespace's pod
// zone, only orders the replicas, so each name is asked of the same few
// and their answers are cached like other owners' answers.
func askPodName(v Reader, key string) Response {
	order := v.Remote(key)
	if len(order) == 0 {
		// No replica to ask yet: neither the address nor NXDOMAIN is known.
		return Response{Rcode: dns.RcodeServerFailure}
	}
	return Response{Remote: order}
}

// podIP parses a dashed pod address: 10-0-0-1 or fd00--1.
func podIP(label string) (netip.Addr, bool) {
	var s string
	if strings.Count(label, "-") == 3 && !strings.Contains(label, "--") {
		s = strings.ReplaceAll(label, "-", ".")
	} else {
		s = strings.ReplaceAll(label, "-", ":")
	}
	ip, err := netip.ParseAddr(s)
	if err != nil || ip.Zone() != "" {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

func answerZone(cfg *Config, v Reader, dir *Directory, route Route, q Question, depth int) Response {
	if !route.Reverse {
		ns, _ := lastLabel(route.Key[:len(route.Key)-len(route.Origin)-len("svc.")])
		if !dir.HasNamespace(ns) {
			return negative(dns.RcodeNameError, dir.soa[route.Origin])
		}
	}
	s := v.Zone(route.Key)
	if route.Reverse {
		if fan := v.FanOut(route.Key); fan != nil {
			return answerPartialReverse(cfg, v, dir, s, route, q, fan)
		}
	}
	if s == nil {
		if r, ok := heldElsewhere(v, route.Key); ok {
			return r
		}
		if route.Reverse {
			return emptyReverse(cfg, dir, route).answerReverse(cfg, v, route, q)
		}
		if q.Name == route.Key {
			return negative(dns.RcodeSuccess, dir.soa[route.Origin])
		}
		return negative(dns.RcodeNameError, dir.soa[route.Origin])
	}
	if route.Reverse {
		return s.answerReverse(cfg, v, route, q)
	}
	return s.answer(cfg, v, q, depth)
}

// emptyReverse is the reverse zone of route when no object has a record
// in it: its misses are answered as a zone's, which k8s_external may
// answer when the kubernetes plugin does not.
func emptyReverse(cfg *Config, dir *Directory, route Route) *Snapshot {
	return &Snapshot{Key: route.Key, Origin: route.Origin, soa: dir.soa[route.Origin], reverse: true, ttl: cfg.TTL}
}

// heldElsewhere is the answer for a name of zone key when no snapshot of
// it is here: the replicas to ask, or SERVFAIL while none can serve it.
// ok is false when the zone is not placed anywhere (it has no records).
func heldElsewhere(v Reader, key string) (Response, bool) {
	order := v.Remote(key)
	if order == nil {
		return Response{}, false
	}
	if len(order) == 0 {
		// The zone exists but no replica can serve it yet: this one may
		// be loading it (the last replica standing as every replica
		// stops, or the only owner left).
		return Response{Rcode: dns.RcodeServerFailure, Wait: v.Loading(key), Zone: key}, true
	}
	return Response{Remote: order, Zone: key}, true
}

// answerPartialReverse answers a name of reverse zone route.Key when the
// reverse zones are partial (Reader.FanOut gave fan). What is held here
// answers when it knows the name; a miss only says this node's share
// lacks it, so it goes to every member in fan, unless the question is
// local only or there is no one else to ask: then the miss is this
// node's own answer.
func answerPartialReverse(cfg *Config, v Reader, dir *Directory, s *Snapshot, route Route, q Question, fan []string) Response {
	held := s != nil
	if !held {
		s = emptyReverse(cfg, dir, route)
	}
	local := s.answerReverse(cfg, v, route, q)
	if held && local.Rcode != dns.RcodeNameError {
		return local // a hit, or NODATA: the name exists here
	}
	if q.LocalOnly {
		return local
	}
	if len(fan) == 0 {
		if !held && v.Remote(route.Key) != nil {
			// Nobody to ask, yet the zone is placed elsewhere, or (a
			// node-local cache with no owner) this node holds nothing of
			// its own: its miss is not an answer.
			return Response{Rcode: dns.RcodeServerFailure}
		}
		return local // alone: this node's share is the whole zone
	}
	return Response{Remote: fan, Zone: route.Key, FanOut: true}
}

// answer answers a name inside this zone.
func (s *Snapshot) answer(cfg *Config, v Reader, q Question, depth int) Response {
	n, ok := s.lookup(q.Name)
	if !ok {
		if q.Name == s.Key && !s.reverse {
			return negative(dns.RcodeSuccess, s.soa) // namespace apex
		}
		if port := underscoredPortName(q.Name); port != "" {
			n, ok = s.lookup(port)
		}
		if !ok {
			return negative(dns.RcodeNameError, s.soa)
		}
	}
	var ans, extra []dns.RR
	switch q.Type {
	case dns.TypeA, dns.TypeAAAA:
		if n.kind == cnameNode {
			return s.chase(cfg, v, n, q, depth)
		}
		ans = n.addresses(q.Name, q.Type == dns.TypeAAAA)
	case dns.TypeSRV:
		ans, extra = n.srv(q.Name)
	case dns.TypeCNAME:
		if c := n.cname(q.Name); c != nil {
			ans = []dns.RR{c}
		}
	}
	if len(ans) == 0 {
		return negative(dns.RcodeSuccess, s.soa)
	}
	var preferred int
	if n.part != nil && n.part.topo != nil {
		ans, extra, preferred = orderForZone(ans, extra, n.part.topo, cfg.topologyFor(q))
	}
	return Response{Answer: ans, Extra: extra, Preferred: preferred}
}

// chase answers A/AAAA for an ExternalName: the CNAME, followed inside the
// cluster domain. An in-cluster target with no such records gives NODATA,
// as in CoreDNS; a target outside is left to the client's resolver.
func (s *Snapshot) chase(cfg *Config, v Reader, n records, q Question, depth int) Response {
	cname := n.cname(q.Name)
	if !InZone(cname.Target, s.Origin) {
		return Response{Answer: []dns.RR{cname}}
	}
	if depth >= maxCNAMEDepth {
		return negative(dns.RcodeSuccess, s.soa)
	}
	next := answer(cfg, v, Question{Name: cname.Target, Type: q.Type}, depth+1)
	if len(next.Remote) > 0 {
		return Response{Answer: []dns.RR{cname}} // held elsewhere: the client follows it
	}
	if next.Rcode != dns.RcodeSuccess || len(next.Answer) == 0 {
		return negative(dns.RcodeSuccess, s.soa)
	}
	ans := make([]dns.RR, 0, 1+len(next.Answer))
	ans = append(ans, cname)
	preferred := 0
	if next.Preferred > 0 {
		preferred = 1 + next.Preferred // the CNAME leads the preferred run
	}
	return Response{Answer: append(ans, next.Answer...), Preferred: preferred}
}

// underscoredPortName returns the _port._proto form of a port name asked
// without one or both underscores (http.tcp.svc…, _http.tcp.svc…), or ""
// when name is not such a form. CoreDNS strips one leading underscore
// from each of the two labels, so these answer as the underscored name
// does; only the underscored name is held, which keeps a named port to
// one name instead of four. Only names whose second label is a protocol
// Kubernetes knows are rebuilt, so other misses allocate nothing.
func underscoredPortName(name string) string {
	port, rest, ok := strings.Cut(name, ".")
	if !ok || port == "" {
		return ""
	}
	proto, rest, ok := strings.Cut(rest, ".")
	if !ok || rest == "" {
		return ""
	}
	switch strings.TrimPrefix(proto, "_") {
	case "tcp", "udp", "sctp":
	default:
		return ""
	}
	if port[0] == '_' && proto[0] == '_' {
		return "" // already the held form
	}
	return "_" + strings.TrimPrefix(port, "_") + "._" + strings.TrimPrefix(proto, "_") + "." + rest
}
