package query

import (
	"slices"

	"github.com/miekg/dns"
)

// StreamWriter sends, in order, the leading messages of an answer that
// takes several (a zone transfer), before Serve returns the last one. It
// is called on the goroutine that called Serve.
type StreamWriter interface {
	WriteStream(msg []byte) error
}

// transferBudget bounds the records of one transfer message, counted
// uncompressed: well inside the 64 KiB of a TCP message.
const transferBudget = 16 << 10

// transfer answers AXFR, and IXFR with a full transfer unless the client
// is up to date (RFC 1995 §4): the records of a file zone, over TCP, to
// the addresses its transferTo allows. Anything else is REFUSED, as by
// CoreDNS's transfer plugin. The transfer comes from this replica's
// snapshot, so it is one consistent version of the zone.
func (h *Handler) transfer(x *exchange, r *dns.Msg, name string, out []byte) []byte {
	refuse := func(reason string) []byte {
		if h.TransferLog != nil && x.t.TCP {
			h.TransferLog.Warn("zone transfer refused", "zone", name, "type", dns.TypeToString[x.req.Question[0].Qtype],
				"client", addrString(x.t.Client), "reason", reason)
		}
		r.Rcode = dns.RcodeRefused
		return h.pack(x, r, out)
	}
	if !x.t.TCP || x.t.Stream == nil {
		return refuse("transfers are served over TCP only")
	}
	if h.Config.External != nil && slices.Contains(h.Config.Domains.External, name) {
		return h.externalTransfer(x, r, name, out, refuse)
	}
	key := h.Config.FileOrigin(h.Zones.Directory(), name)
	if key == "" || key != name {
		return refuse("not the origin of a zone file")
	}
	s := h.Zones.Zone(key)
	if s == nil || s.File == nil {
		return refuse("the zone is not held by this replica: it has no transferTo, or is still loading")
	}
	if !s.TransferAllowed(x.t.Client.Addr()) {
		return refuse("the client is not in the zone's transferTo")
	}
	x.zone = key
	rrs := s.Transfer()
	if x.req.Question[0].Qtype == dns.TypeIXFR && upToDate(x.req, s.Serial) {
		rrs = rrs[:1] // the SOA alone: nothing to send
	}
	return h.sendTransfer(x, r, rrs, s.Serial, out)
}

// upToDate reports whether an IXFR's SOA (in the authority section) has
// the current serial or a later one (RFC 1982 arithmetic).
func upToDate(req *dns.Msg, serial uint32) bool {
	if len(req.Ns) != 1 {
		return false
	}
	soa, ok := req.Ns[0].(*dns.SOA)
	return ok && int32(soa.Serial-serial) >= 0
}

// transferMessages packs rrs into as many messages as they need, each
// with the question, the AA bit and, when the request had one, an OPT.
func (h *Handler) transferMessages(x *exchange, rrs []dns.RR) ([][]byte, error) {
	var msgs [][]byte
	for start := 0; start < len(rrs); {
		end, size := start, 0
		for end < len(rrs) && (end == start || size+dns.Len(rrs[end]) <= transferBudget) {
			size += dns.Len(rrs[end])
			end++
		}
		m := new(dns.Msg)
		m.SetReply(x.req)
		m.Authoritative, m.Compress = true, true
		m.Answer = rrs[start:end]
		if x.opt != nil {
			m.SetEdns0(MaxUDPSize, false)
		}
		b, err := m.Pack()
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, b)
		start = end
	}
	return msgs, nil
}
