// Package hosts answers names from /etc/hosts-format entries, as CoreDNS's
// hosts plugin does: A and AAAA by name, PTR by address, within the
// configured zones, passing names it has no entry for on only where
// fallthrough allows.
//
// A Snapshot is immutable and answers without allocating; a Hosts owns
// the goroutine that re-reads the files and publishes a new Snapshot when
// they change, which the query path loads atomically.
package hosts

import (
	"github.com/miekg/dns"

	"github.com/shardns/shardns/zone"
)

// Verdict is what the hosts entries make of a question.
type Verdict uint8

const (
	// Pass: not a hosts name; the cluster zones and the forwarder answer.
	Pass Verdict = iota
	// Answer: the records returned (none: NODATA, the name has an entry
	// of another type).
	Answer
	// Fail: inside the hosts zones, no entry, no fallthrough. Without an
	// SOA to put in an NXDOMAIN, CoreDNS answers SERVFAIL; so does shardns.
	Fail
)

// Options are what a Snapshot answers with, besides the entries.
type Options struct {
	// Zones the entries answer for (lower-case FQDNs); empty: every name.
	Zones []string
	// Fallthrough zones pass names without an entry on; "." every name.
	Fallthrough []string
	// TTL of every record.
	TTL uint32
	// NoReverse serves no PTR records.
	NoReverse bool
}

// Snapshot is one immutable set of entries, ready to answer.
type Snapshot struct {
	opts    Options
	names   map[string]*records // name → its A and AAAA records
	reverse map[string][]dns.RR // reverse name (…in-addr.arpa.) → PTR records
}

type records struct {
	a, aaaa []dns.RR
}

// NewSnapshot builds the records of entries. Names outside opts.Zones are
// left out, as CoreDNS does; repeated addresses and names count once.
func NewSnapshot(opts Options, entries []Entry) *Snapshot {
	s := &Snapshot{opts: opts, names: map[string]*records{}, reverse: map[string][]dns.RR{}}
	seen := map[string]bool{} // "name addr", for duplicates across lines and files
	for _, e := range entries {
		// ::ffff:192.0.2.1 is written as IPv6: an AAAA record, as CoreDNS.
		addr := e.Addr
		for _, name := range e.Names {
			if !inZones(name, opts.Zones) {
				continue
			}
			key := name + " " + addr.String()
			if seen[key] {
				continue
			}
			seen[key] = true
			rec := s.names[name]
			if rec == nil {
				rec = &records{}
				s.names[name] = rec
			}
			hdr := dns.RR_Header{Name: name, Class: dns.ClassINET, Ttl: opts.TTL}
			if addr.Is4() {
				hdr.Rrtype = dns.TypeA
				rec.a = append(rec.a, &dns.A{Hdr: hdr, A: addr.AsSlice()})
			} else {
				hdr.Rrtype = dns.TypeAAAA
				rec.aaaa = append(rec.aaaa, &dns.AAAA{Hdr: hdr, AAAA: addr.AsSlice()})
			}
			if opts.NoReverse {
				continue
			}
			rev, err := dns.ReverseAddr(addr.String())
			if err != nil {
				continue
			}
			s.reverse[rev] = append(s.reverse[rev], &dns.PTR{
				Hdr: dns.RR_Header{Name: rev, Rrtype: dns.TypePTR, Class: dns.ClassINET, Ttl: opts.TTL}, Ptr: name})
		}
	}
	return s
}

// Lookup answers a question (lower-case, fully qualified name). The
// records are shared: callers copy before changing them. It allocates
// nothing, so the query fast path can ask it first.
func (s *Snapshot) Lookup(name string, qtype uint16) ([]dns.RR, Verdict) {
	if qtype == dns.TypePTR {
		// PTR names need not be in the zones; an address without an
		// entry always goes on (CoreDNS's hosts does the same).
		if rrs := s.reverse[name]; len(rrs) > 0 {
			return rrs, Answer
		}
		return nil, Pass
	}
	if !inZones(name, s.opts.Zones) {
		return nil, Pass
	}
	if rec := s.names[name]; rec != nil {
		switch qtype {
		case dns.TypeA:
			return rec.a, Answer
		case dns.TypeAAAA:
			return rec.aaaa, Answer
		}
		return nil, Answer // the name exists: NODATA for other types
	}
	if inAny(name, s.opts.Fallthrough) {
		return nil, Pass
	}
	return nil, Fail
}

// Zone is the hosts zone name lies in ("." when every name is), for the
// metrics label.
func (s *Snapshot) Zone(name string) string {
	best := "."
	for _, z := range s.opts.Zones {
		if zone.InZone(name, z) && len(z) > len(best) {
			best = z
		}
	}
	return best
}

func inZones(name string, zones []string) bool {
	return len(zones) == 0 || inAny(name, zones)
}

func inAny(name string, zones []string) bool {
	for _, z := range zones {
		if zone.InZone(name, z) {
			return true
		}
	}
	return false
}
