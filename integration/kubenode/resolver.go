package kubenode

import (
	"net"
	"strconv"

	"github.com/miekg/dns"
)

// upstreamPort is where the node's resolver listens, on hostIP.
const upstreamPort = 53

// upstream is the node's resolver, named by the resolv.conf that kubelet
// gives dnsPolicy: Default pods (the shardns replicas forward to it). It
// answers every question NXDOMAIN, with the root's SOA for negative
// caching, as the root zone does for the single-label and cluster-made
// names the tests ask: a resolver like the one a real node has, whose
// answers for what the tests ask are known, and which sends nothing off
// the host. Without one a forwarded question fails (SERVFAIL), and
// resolvers that try the search path only after an NXDOMAIN (busybox's
// nslookup for names with a dot) stop there.
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
	h := dns.HandlerFunc(nxdomain)
	u := &upstream{servers: []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: l, Handler: h}}}
	for _, s := range u.servers {
		go s.ActivateAndServe() // returns when stop shuts it down
	}
	return u, nil
}

func nxdomain(w dns.ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetRcode(r, dns.RcodeNameError)
	m.Authoritative = true
	m.Ns = []dns.RR{&dns.SOA{
		Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 30},
		Ns:  "a.root-servers.net.", Mbox: "nstld.verisign-grs.com.",
		Serial: 1, Refresh: 1800, Retry: 900, Expire: 604800, Minttl: 30,
	}}
	w.WriteMsg(m)
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
