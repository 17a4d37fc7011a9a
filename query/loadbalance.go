package query

import (
	"math/rand/v2"

	"github.com/miekg/dns"
)

// shuffled returns rrs with its A and AAAA records in random order and
// every other record (a CNAME chain first) where it was, like CoreDNS's
// loadbalance. Single-address answers are returned as they are, without
// a copy.
func shuffled(rrs []dns.RR) []dns.RR {
	n := 0
	for _, rr := range rrs {
		if t := rr.Header().Rrtype; t == dns.TypeA || t == dns.TypeAAAA {
			n++
		}
	}
	if n < 2 {
		return rrs
	}
	out := make([]dns.RR, len(rrs))
	copy(out, rrs)
	idx := make([]int, 0, n)
	for i, rr := range out {
		if t := rr.Header().Rrtype; t == dns.TypeA || t == dns.TypeAAAA {
			idx = append(idx, i)
		}
	}
	rand.Shuffle(len(idx), func(i, j int) {
		out[idx[i]], out[idx[j]] = out[idx[j]], out[idx[i]]
	})
	return out
}
