package query

import (
	"context"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/zone"
)

// QueryLogRule narrows and shapes the query log as CoreDNS's log plugin
// does: the names it covers, the classes of response it keeps, and the
// message's format. The zero rule (and nil) logs every query with
// shardns's own fields.
type QueryLogRule struct {
	names   []string // lower-case, fully qualified; empty: every name
	classes logClass // a set; 0: every class
	format  []logNode
}

// logClass is CoreDNS's classification of a response, as a bit set.
type logClass uint8

const (
	logSuccess logClass = 1 << iota
	logDenial
	logError
)

// NewQueryLogRule compiles a rule from the log keys: names (lower-case,
// fully qualified), classes (all, success, denial, error) and format
// (CoreDNS's placeholders; "": shardns's fields).
func NewQueryLogRule(names, classes []string, format string) *QueryLogRule {
	r := &QueryLogRule{names: names}
	for _, c := range classes {
		switch c {
		case "all":
			r.classes = 0 // "all" mixed with others is all
			return r.withFormat(format)
		case "success":
			r.classes |= logSuccess
		case "denial":
			r.classes |= logDenial
		case "error":
			r.classes |= logError
		}
	}
	return r.withFormat(format)
}

func (r *QueryLogRule) withFormat(format string) *QueryLogRule {
	r.format = parseLogFormat(format)
	if r.classes == logSuccess|logDenial|logError {
		r.classes = 0
	}
	return r
}

// admits reports whether the query of name (lower-case), answered with
// class, is logged.
func (r *QueryLogRule) admits(name string, class logClass) bool {
	if r == nil {
		return true
	}
	if r.classes != 0 && r.classes&class == 0 {
		return false
	}
	if len(r.names) == 0 {
		return true
	}
	for _, z := range r.names {
		if zone.InZone(name, z) {
			return true
		}
	}
	return false
}

// classify is CoreDNS's class of a response: NXDOMAIN and NODATA (no
// answer, an SOA in the authority section) are denials, other NOERRORs
// successes, anything else an error. resp may be nil (a reply built
// from the rcode alone).
func classify(rcode int, resp *dns.Msg) logClass {
	answers, soa := 0, false
	if resp != nil {
		answers = len(resp.Answer)
		for _, rr := range resp.Ns {
			soa = soa || rr.Header().Rrtype == dns.TypeSOA
		}
	}
	switch {
	case rcode == dns.RcodeSuccess && answers == 0 && soa:
		return logDenial
	case rcode == dns.RcodeSuccess:
		return logSuccess
	case rcode == dns.RcodeNameError && answers == 0:
		return logDenial
	}
	return logError
}

// logQuery writes the query log line of x, when the rule admits it.
func (h *Handler) logQuery(x *exchange, rcode, respSize int) {
	q, ok := x.question()
	name := "."
	if ok {
		name = q.Name
	}
	if !h.QueryLogRule.admits(lower(name), classify(rcode, x.resp)) {
		return
	}
	if h.QueryLogRule != nil && h.QueryLogRule.format != nil {
		e := logEntry{x: x, q: q, hasQ: ok, rcode: rcode, rsize: respSize}
		h.QueryLog.LogAttrs(context.Background(), slog.LevelInfo, string(e.appendFormat(nil, h.QueryLogRule.format)))
		return
	}
	h.QueryLog.LogAttrs(context.Background(), slog.LevelInfo, "query",
		slog.String("client", addrString(x.t.Client)), slog.Int("id", int(x.req.Id)),
		slog.String("type", dns.TypeToString[q.Qtype]), slog.String("name", name),
		slog.String("proto", proto(x.t)), slog.Int("size", x.reqSize),
		slog.String("rcode", rcodeLabel(rcode)), slog.Int("rsize", respSize),
		slog.Duration("duration", time.Since(x.start)))
}

// logEntry is what a format's placeholders read.
type logEntry struct {
	x     *exchange
	q     dns.Question // the asked one
	hasQ  bool
	rcode int
	rsize int
}

func (e *logEntry) appendFormat(b []byte, f []logNode) []byte {
	for _, n := range f {
		if n.label {
			b = e.appendValue(b, n.text)
		} else {
			b = append(b, n.text...)
		}
	}
	return b
}

// emptyValue stands for what a placeholder cannot tell, as in CoreDNS.
const emptyValue = "-"

// appendValue appends the value of one placeholder.
func (e *logEntry) appendValue(b []byte, label string) []byte {
	x := e.x
	switch label {
	case "{rcode}":
		if s, ok := dns.RcodeToString[e.rcode]; ok {
			return append(b, s...)
		}
		return strconv.AppendInt(b, int64(e.rcode), 10)
	case "{rsize}":
		return strconv.AppendInt(b, int64(e.rsize), 10)
	case "{duration}":
		return append(strconv.AppendFloat(b, time.Since(x.start).Seconds(), 'f', -1, 64), 's')
	case "{>rflags}":
		if x.resp == nil {
			return append(b, emptyValue...)
		}
		return appendFlags(b, x.resp.MsgHdr)
	case "{proto}":
		return append(b, proto(x.t)...)
	case "{size}":
		return strconv.AppendInt(b, int64(x.reqSize), 10)
	case "{remote}":
		return appendAddr(b, x.t.Client)
	case "{local}":
		return appendAddr(b, x.t.Server)
	case "{port}":
		if !x.t.Client.IsValid() {
			return append(b, emptyValue...)
		}
		return strconv.AppendUint(b, uint64(x.t.Client.Port()), 10)
	case "{>id}":
		return strconv.AppendInt(b, int64(x.req.Id), 10)
	case "{>opcode}":
		return strconv.AppendInt(b, int64(x.req.Opcode), 10)
	case "{>do}":
		return strconv.AppendBool(b, x.opt != nil && x.opt.Do())
	case "{>bufsize}":
		return strconv.AppendInt(b, int64(bufSize(x)), 10)
	}
	if !e.hasQ {
		return append(b, emptyValue...)
	}
	switch label {
	case "{type}":
		return append(b, dns.Type(e.q.Qtype).String()...)
	case "{name}":
		return append(b, lower(e.q.Name)...)
	case "{class}":
		return append(b, dns.Class(e.q.Qclass).String()...)
	}
	return append(b, emptyValue...)
}

// bufSize is the response size the client allows, as CoreDNS's
// {>bufsize} reports it: 65535 over TCP, else its EDNS0 size, at
// least 512.
func bufSize(x *exchange) int {
	if x.t.TCP {
		return dns.MaxMsgSize
	}
	if x.opt != nil {
		return max(int(x.opt.UDPSize()), dns.MinMsgSize)
	}
	return dns.MinMsgSize
}

// appendAddr appends an address's IP, an IPv6 one in brackets.
func appendAddr(b []byte, a netip.AddrPort) []byte {
	if !a.IsValid() {
		return append(b, emptyValue...)
	}
	ip := a.Addr().Unmap()
	if ip.Is6() {
		return append(ip.AppendTo(append(b, '[')), ']')
	}
	return ip.AppendTo(b)
}

// appendFlags appends the set header flags, comma-separated.
func appendFlags(b []byte, h dns.MsgHdr) []byte {
	n := len(b)
	for _, f := range []struct {
		set  bool
		name string
	}{{h.Response, "qr"}, {h.Authoritative, "aa"}, {h.Truncated, "tc"}, {h.RecursionDesired, "rd"},
		{h.RecursionAvailable, "ra"}, {h.Zero, "z"}, {h.AuthenticatedData, "ad"}, {h.CheckingDisabled, "cd"}} {
		if f.set {
			if len(b) > n {
				b = append(b, ',')
			}
			b = append(b, f.name...)
		}
	}
	return b
}

// CoreDNS's common and combined log formats.
const (
	commonLogFormat   = `{remote}:{port} - {>id} "{type} {class} {name} {proto} {size} {>do} {>bufsize}" {rcode} {>rflags} {rsize} {duration}`
	combinedLogFormat = commonLogFormat + ` "{>opcode}"`
)

// logLabels are the placeholders a format may use.
var logLabels = map[string]bool{
	"{type}": true, "{name}": true, "{class}": true, "{proto}": true, "{size}": true,
	"{remote}": true, "{port}": true, "{local}": true, "{rcode}": true, "{rsize}": true,
	"{duration}": true, "{>id}": true, "{>opcode}": true, "{>do}": true, "{>bufsize}": true,
	"{>rflags}": true,
}

// logNode is a piece of a format: a placeholder, or text.
type logNode struct {
	label bool
	text  string
}

// parseLogFormat splits a format into text and placeholders, as
// CoreDNS's replacer does: the innermost {...} before each }, an unknown
// one kept as text, a metadata label ({/name}) as "-" (shardns sets no
// metadata). "" is nil: shardns's own fields.
func parseLogFormat(s string) []logNode {
	if s == "" {
		return nil
	}
	s = strings.ReplaceAll(s, "{common}", commonLogFormat)
	s = strings.ReplaceAll(s, "{combined}", combinedLogFormat)
	out := []logNode{}
	for {
		j := strings.IndexByte(s, '}')
		if j < 0 {
			break
		}
		i, val := strings.LastIndexByte(s[:j], '{'), ""
		if i >= 0 {
			val = s[i : j+1]
		}
		switch {
		case logLabels[val]:
			out = append(out, logNode{text: s[:i]}, logNode{label: true, text: val})
		case strings.HasPrefix(val, "{/"):
			out = append(out, logNode{text: s[:i] + emptyValue})
		default:
			out = append(out, logNode{text: s[:j+1]})
		}
		s = s[j+1:]
	}
	return append(out, logNode{text: s})
}
