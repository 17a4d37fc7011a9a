package query

import (
	"encoding/hex"

	"github.com/miekg/dns"
)

// Modifiers change requests and responses as CoreDNS's bufsize, nsid,
// header and dns64 plugins do. A handler with modifiers answers every
// query through the full path: the fast path's packed answers are built
// once for many clients and know none of this.
type Modifiers struct {
	// BufSize caps the EDNS0 UDP size a request offers, before it is
	// answered or forwarded, and the answer advertises the capped size,
	// as CoreDNS's bufsize; 0 leaves requests alone.
	BufSize uint16
	// NSID, when set, is sent in an NSID option to requests that carry
	// one (RFC 5001).
	NSID []byte
	// QueryFlags change each request's header before it is answered;
	// ResponseFlags each response's, in order (later rules win).
	QueryFlags, ResponseFlags []FlagRule
	// DNS64 synthesises AAAA records from A records; nil: off.
	DNS64 *DNS64
}

// FlagRule sets or clears one header flag.
type FlagRule struct {
	Flag string // aa, ra or rd
	Set  bool
}

// modifyRequest applies the request side: the buffer size cap and the
// query flag rules. The OPT record of x is the request's, so a forwarded
// question offers the capped size too.
func (h *Handler) modifyRequest(x *exchange) {
	m := h.Modify
	if m == nil {
		return
	}
	if m.BufSize > 0 && x.opt != nil && x.opt.UDPSize() > m.BufSize {
		x.opt.SetUDPSize(m.BufSize)
	}
	applyFlags(&x.req.MsgHdr, m.QueryFlags)
}

// modifyResponse applies the response flag rules to r.
func (h *Handler) modifyResponse(r *dns.Msg) {
	if h.Modify != nil {
		applyFlags(&r.MsgHdr, h.Modify.ResponseFlags)
	}
}

func applyFlags(hdr *dns.MsgHdr, rules []FlagRule) {
	for _, rule := range rules {
		switch rule.Flag {
		case "aa":
			hdr.Authoritative = rule.Set
		case "ra":
			hdr.RecursionAvailable = rule.Set
		case "rd":
			hdr.RecursionDesired = rule.Set
		}
	}
}

// replyOPT is the OPT record of a response to an EDNS0 request: the
// buffer size shardns takes (with a bufsize cap, the request's capped
// size, which CoreDNS echoes), the extended error of the answer if any
// (acl, template) and, when asked for and configured, NSID.
func (h *Handler) replyOPT(x *exchange) *dns.OPT {
	reply := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	reply.SetUDPSize(MaxUDPSize)
	if x.ede != nil {
		reply.Option = append(reply.Option, x.ede)
	}
	m := h.Modify
	if m == nil {
		return reply
	}
	if m.BufSize > 0 {
		reply.SetUDPSize(x.opt.UDPSize())
	}
	if m.NSID != nil && asksNSID(x.opt) {
		reply.Option = append(reply.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID, Nsid: hex.EncodeToString(m.NSID)})
	}
	return reply
}

func asksNSID(opt *dns.OPT) bool {
	for _, o := range opt.Option {
		if o.Option() == dns.EDNS0NSID {
			return true
		}
	}
	return false
}
