package config

import (
	"fmt"
	"strings"

	"github.com/miekg/dns"
)

// ForwardOptions are the options of CoreDNS's forward that the default
// forwarder (forward.*) and each stub domain (forward.stubs[]) have of
// their own, as each forward block of a Corefile has.
type ForwardOptions struct {
	// ForceTCP asks plain upstreams over TCP, on connections kept open
	// (expire, maxAge, maxIdleConns), whatever transport the question
	// came over (force_tcp). It wins over PreferUDP, as in CoreDNS.
	ForceTCP bool `json:"forceTCP"`
	// PreferUDP asks plain upstreams over UDP even for a question that
	// came over TCP (prefer_udp); a truncated answer is asked again over
	// TCP. Without either, a question that came over TCP is asked over
	// TCP, one over UDP over UDP (and TCP when truncated).
	PreferUDP bool `json:"preferUDP"`
	// Failover are rcodes (SERVFAIL, REFUSED, ...; not NOERROR) on which
	// the next upstream is asked, as when one does not answer; the last
	// upstream's answer is the answer (failover).
	Failover []string `json:"failover"`
	// Except are zones whose names this forwarder does not ask (except):
	// they go to the forwarder of the next shorter zone that holds them
	// (a stub's to forward.upstreams), and get SERVFAIL when there is
	// none, as CoreDNS's forward passes them to the next plugin.
	Except []string `json:"except"`
}

// ParseRcodes reads rcode names (NXDOMAIN, servfail, ...) as numbers.
func ParseRcodes(names []string) ([]int, error) {
	var out []int
	for _, n := range names {
		rc, ok := dns.StringToRcode[strings.ToUpper(n)]
		if !ok {
			return nil, fmt.Errorf("%q is not an rcode", n)
		}
		out = append(out, rc)
	}
	return out, nil
}

// checkForwardOptions reports rcodes that are none and except zones that
// are no domain names, under key.
func checkForwardOptions(bad func(key, format string, args ...any), key string, o ForwardOptions) {
	checkRcodes(bad, key+"failover", o.Failover, false)
	checkZones(bad, key+"except", o.Except, false)
}

// checkRcodes reports the names under key that are no rcode, and NOERROR
// unless noError: an answer, not a failure.
func checkRcodes(bad func(key, format string, args ...any), key string, names []string, noError bool) {
	for i, n := range names {
		rc, err := ParseRcodes([]string{n})
		switch {
		case err != nil:
			bad(fmt.Sprintf("%s[%d]", key, i), "%v", err)
		case rc[0] == dns.RcodeSuccess && !noError:
			bad(fmt.Sprintf("%s[%d]", key, i), "NOERROR is an answer: it cannot send the question on")
		}
	}
}

// checkMaxAge refuses a negative max age, and one shorter than expire
// (CoreDNS refuses both): a connection would be replaced before it
// could idle out.
func checkMaxAge(bad func(key, format string, args ...any), f *ForwardConfig) {
	switch {
	case f.MaxAge < 0:
		bad("forward.maxAge", "must not be negative")
	case f.MaxAge > 0 && f.MaxAge < f.Expire:
		bad("forward.maxAge", "must be 0 or at least forward.expire (%s), got %s", f.Expire.D(), f.MaxAge.D())
	}
}

// checkUpstreams reports the upstreams under key that cannot be asked:
// a host name, a scheme shardns has not, a port out of range. The
// resolv.conf files named are read when the forwarder starts.
func checkUpstreams(bad func(key, format string, args ...any), key string, upstreams []string) {
	for i, u := range upstreams {
		if strings.HasPrefix(u, "/") {
			continue
		}
		if _, err := ParseUpstream(u); err != nil {
			bad(fmt.Sprintf("%s[%d]", key, i), "%q: %v", u, err)
		}
	}
}
