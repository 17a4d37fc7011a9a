package kubenode

import (
	"net"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// upstreamPort is where the node's resolver listens, on hostIP.
const upstreamPort = 53

// The one external name the node's resolver knows, under the reserved
// .test domain: a name outside the cluster that resolves, as a pod's
// www.example.com does on a real node, without sending anything off the
// host. Its addresses are from the documentation ranges.
const (
	ExternalName = "external.shardns.test"
	ExternalIPv4 = "192.0.2.53"
	ExternalIPv6 = "2001:db8::53"
	ExternalTXT  = "shardns-external"
)

// upstream is the node's resolver, named by the resolv.conf that kubelet
// gives dnsPolicy: Default pods (the shardns replicas and the node-local
// process forward to it). It answers ExternalName (A, AAAA and TXT; NODATA
// to other types) and every other question NXDOMAIN, with the root's SOA
// for negative caching, as the root zone does for the single-label and
// cluster-made names the tests ask: a resolver like the one a real node
// has, whose answers for what the tests ask are known, and which sends
// nothing off the host. Without one a forwarded question fails
// (SERVFAIL), and resolvers that try the search path only after an
// NXDOMAIN (busybox's nslookup for names with a dot) stop there.
type upstream struct {
	servers []*dns.Server
}

// startUpstream listens on hostIP:53, UDP and TCP, and serves until stop.
func startUpstream() (*upstream, error) {
	addr := net.JoinHostPort(hostIP, strconv.Itoa(upstreamPort))
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		pc.Close()
		return nil, err
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) { w.WriteMsg(upstreamAnswer(r)) })
	u := &upstream{servers: []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: l, Handler: h}}}
	for _, s := range u.servers {
		go s.ActivateAndServe() // returns when stop shuts it down
	}
	return u, nil
}

// upstreamAnswer is the node resolver's answer to r.
func upstreamAnswer(r *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	if len(r.Question) != 1 {
		m.Rcode = dns.RcodeFormatError
		return m
	}
	q := r.Question[0]
	if !strings.EqualFold(q.Name, ExternalName+".") {
		m.Rcode = dns.RcodeNameError
		m.Ns = []dns.RR{rootSOA()}
		return m
	}
	hdr := dns.RR_Header{Name: q.Name, Rrtype: q.Qtype, Class: dns.ClassINET, Ttl: 30}
	switch q.Qtype {
	case dns.TypeA:
		m.Answer = []dns.RR{&dns.A{Hdr: hdr, A: net.ParseIP(ExternalIPv4)}}
	case dns.TypeAAAA:
		m.Answer = []dns.RR{&dns.AAAA{Hdr: hdr, AAAA: net.ParseIP(ExternalIPv6)}}
	case dns.TypeTXT:
		m.Answer = []dns.RR{&dns.TXT{Hdr: hdr, Txt: []string{ExternalTXT}}}
	default:
		m.Ns = []dns.RR{rootSOA()}
	}
	return m
}

func rootSOA() dns.RR {
	return &dns.SOA{
		Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 30},
		Ns:  "a.root-servers.net.", Mbox: "nstld.verisign-grs.com.",
		Serial: 1, Refresh: 1800, Retry: 900, Expire: 604800, Minttl: 30,
	}
}

// stop shuts the servers down; it does nothing on a nil upstream.
func (u *upstream) stop() {
	if u == nil {
		return
	}
	for _, s := range u.servers {
		s.Shutdown()
	}
}
