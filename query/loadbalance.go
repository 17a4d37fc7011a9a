package query

import (
	"math/rand/v2"

	"github.com/miekg/dns"
)

// shuffled returns rrs with its A and AAAA records in random order and
// every other record (a CNAME chain first) where it was, like CoreDNS's
// loadbalance. Single-address answers are returned as they are, without
// a copy.
func shuffled(rrs []dns.RR) []dns.RR { return shuffledRuns(rrs, 0) }

// shuffledRuns is shuffled for an answer whose first preferred records
// were preferred for the asker's zone (zone.Response.Preferred): the
// addresses of that run and of the rest are shuffled apart, so the
// preferred ones stay first. preferred 0 is one run, the whole answer.
func shuffledRuns(rrs []dns.RR, preferred int) []dns.RR {
	if preferred <= 0 || preferred >= len(rrs) {
		preferred = len(rrs)
	}
	if addressCount(rrs[:preferred]) < 2 && addressCount(rrs[preferred:]) < 2 {
		return rrs
	}
	out := make([]dns.RR, len(rrs))
	copy(out, rrs)
	shuffleAddresses(out[:preferred])
	shuffleAddresses(out[preferred:])
	return out
}

// shuffleAddresses puts the A and AAAA records of rrs in random order
// among their own places.
func shuffleAddresses(rrs []dns.RR) {
	var at [16]int
	idx := at[:0]
	for i, rr := range rrs {
		if t := rr.Header().Rrtype; t == dns.TypeA || t == dns.TypeAAAA {
			idx = append(idx, i)
		}
	}
	rand.Shuffle(len(idx), func(i, j int) {
		rrs[idx[i]], rrs[idx[j]] = rrs[idx[j]], rrs[idx[i]]
	})
}
