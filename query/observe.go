package query

import (
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// observe records metrics and the query log line of one answered request.
func (h *Handler) observe(x *exchange, rcode, respSize int) {
	qtype := "other"
	if q, ok := x.question(); ok {
		qtype = typeLabel(q.Qtype)
	}
	if h.QueryLog != nil {
		h.logQuery(x, rcode, respSize)
	}
	if h.Metrics == nil {
		return
	}
	m := h.Metrics.DNS
	family := "1"
	if x.t.IPv6 {
		family = "2"
	}
	p := proto(x.t)
	m.Requests.WithLabelValues(h.Server, x.zone, h.ViewName, p, family, qtype).Inc()
	m.Responses.WithLabelValues(h.Server, x.zone, h.ViewName, rcodeLabel(rcode), "").Inc()
	m.Duration.WithLabelValues(h.Server, x.zone, h.ViewName, qtype).Observe(time.Since(x.start).Seconds())
	m.RequestSize.WithLabelValues(h.Server, x.zone, h.ViewName, p).Observe(float64(x.reqSize))
	m.ResponseSize.WithLabelValues(h.Server, x.zone, h.ViewName, p).Observe(float64(respSize))
}

// logError logs why a request failed, when the error log is on.
func (h *Handler) logError(x *exchange, what string, err error) {
	if h.ErrorLog == nil {
		return
	}
	name := "."
	if len(x.req.Question) == 1 {
		name = x.req.Question[0].Name
	}
	h.ErrorLog.Warn(what, "name", name, "type", dns.TypeToString[firstType(x.req)],
		"client", addrString(x.t.Client), "err", err)
}

func firstType(m *dns.Msg) uint16 {
	if len(m.Question) == 1 {
		return m.Question[0].Qtype
	}
	return 0
}

func proto(t Transport) string {
	if t.TCP {
		return "tcp"
	}
	return "udp"
}

func addrString(a netip.AddrPort) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// typeLabel keeps the metric's cardinality bounded, as CoreDNS does: the
// common types by name, everything else as "other".
func typeLabel(t uint16) string {
	switch t {
	case dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypePTR, dns.TypeTXT, dns.TypeCNAME,
		dns.TypeMX, dns.TypeNS, dns.TypeSOA, dns.TypeAXFR, dns.TypeIXFR, dns.TypeANY, dns.TypeHTTPS:
		return dns.TypeToString[t]
	}
	return "other"
}

func rcodeLabel(rc int) string {
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return "other"
}

// meterCache keeps the metric children of each label combination, so the
// fast path does not hash label values per query.
type meterCache struct{ m sync.Map } // meterKey → *meters

type meterKey struct {
	zone      string
	tcp, ipv6 bool
	qtype     uint16
	rcode     int
}

type meters struct {
	requests, responses prometheus.Counter
	duration            prometheus.Observer
	reqSize, respSize   prometheus.Observer
}

// durationSampling: the fast path times one answer in this many. Reading
// the clock twice costs more than the answer itself on some machines; the
// duration histogram's average stays true, its count is a sample (use
// shardns_dns_requests_total for rates).
const durationSampling = 16

// observeFast records the metrics of a fast-path answer.
// start is zero for the answers not sampled.
func (h *Handler) observeFast(e *packedAnswer, t Transport, qtype uint16, reqSize, respSize int, start time.Time) {
	if h.Metrics == nil {
		return
	}
	k := meterKey{zone: e.zone, tcp: t.TCP, ipv6: t.IPv6, qtype: qtype, rcode: e.rcode}
	v, ok := h.metered.m.Load(k)
	if !ok {
		m := h.Metrics.DNS
		family, p, ql := "1", proto(t), typeLabel(qtype)
		if t.IPv6 {
			family = "2"
		}
		v, _ = h.metered.m.LoadOrStore(k, &meters{
			requests:  m.Requests.WithLabelValues(h.Server, e.zone, h.ViewName, p, family, ql),
			responses: m.Responses.WithLabelValues(h.Server, e.zone, h.ViewName, rcodeLabel(e.rcode), ""),
			duration:  m.Duration.WithLabelValues(h.Server, e.zone, h.ViewName, ql),
			reqSize:   m.RequestSize.WithLabelValues(h.Server, e.zone, h.ViewName, p),
			respSize:  m.ResponseSize.WithLabelValues(h.Server, e.zone, h.ViewName, p),
		})
	}
	ms := v.(*meters)
	ms.requests.Inc()
	ms.responses.Inc()
	if !start.IsZero() {
		ms.duration.Observe(time.Since(start).Seconds())
	}
	ms.reqSize.Observe(float64(reqSize))
	ms.respSize.Observe(float64(respSize))
}
