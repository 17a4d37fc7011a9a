package node

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/listeners"
)

// rrlConfig is dns.rrl as the listeners apply it.
func rrlConfig(c config.RRLConfig) listeners.RRLConfig {
	return listeners.RRLConfig{PerSecond: c.Rates(), Window: c.Window.D(), Slip: c.SlipRatio(),
		IPv4PrefixLength: c.IPv4PrefixLength, IPv6PrefixLength: c.IPv6PrefixLength,
		MaxTableSize: c.MaxTableSize, ReportOnly: c.ReportOnly}
}

// rrlCounters are a listener's children of shardns_dns_rrl_responses_total,
// made once so that counting costs no label lookup per answer.
func rrlCounters(vec *prometheus.CounterVec, server string) *listeners.RRLCounters {
	var c listeners.RRLCounters
	for class := range listeners.NumRRLClasses {
		for action := listeners.RRLSlip; action < listeners.NumRRLActions; action++ {
			c[class][action] = vec.WithLabelValues(server, class.String(), action.String())
		}
	}
	return &c
}

// limits sets a listener's per-client bounds in cfg: the UDP rate limit,
// response rate limiting, the TCP connection bounds, the large TCP
// messages and the DNS over HTTPS bounds.
func (n *Node) limits(e *listenerEntry, cfg *listeners.Config) {
	server := e.spec.transport + "://" + e.sockets.Addr()
	cfg.RateLimit = e.limiter
	cfg.RateLimited = n.metrics.DNS.Dropped.WithLabelValues(server, "ratelimit")
	cfg.RRL, cfg.RRLCounters = e.rrl, rrlCounters(n.metrics.DNS.RRL, server)
	cfg.MaxConnectionsPerSource = n.cfg.DNS.TCPMaxConnectionsPerSource
	cfg.Evicted = n.metrics.DNS.TCPEvicted.WithLabelValues(server, "full")
	cfg.EvictedSource = n.metrics.DNS.TCPEvicted.WithLabelValues(server, "source")
	cfg.MaxLargeMessages = n.cfg.DNS.MaxLargeMessages
	cfg.HTTPS = listeners.HTTPSLimits{MaxStreams: n.cfg.DNS.HTTPSMaxStreams, MaxInFlight: n.cfg.DNS.HTTPSMaxInFlight,
		BodyTimeout: n.cfg.DNS.HTTPSBodyTimeout.D()}
	if e.spec.transport != "https" {
		cfg.LargeEvicted = n.metrics.DNS.TCPEvicted.WithLabelValues(server, "buffer")
		cfg.LargeDropped = n.metrics.DNS.Dropped.WithLabelValues(server, "buffer")
		return
	}
	refused := n.metrics.DNS.HTTPSRefused.MustCurryWith(prometheus.Labels{"server": server})
	cfg.HTTPS.Refused = listeners.HTTPSRefusals{Streams: refused.WithLabelValues("streams"),
		InFlight: refused.WithLabelValues("inflight"), Evicted: refused.WithLabelValues("evicted"),
		BodyTimeout: refused.WithLabelValues("body_timeout")}
}
