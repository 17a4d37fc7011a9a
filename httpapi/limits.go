package httpapi

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Limits bound one server's connections and the time of its requests.
type Limits struct {
	// MaxConnections open at once; a new one closes the one waiting
	// longest (conns.go).
	MaxConnections int
	// MaxConnectionsPerSource open at once from one client address.
	MaxConnectionsPerSource int
	// ReadHeaderTimeout bounds a request's line and headers; ReadTimeout
	// the whole request.
	ReadHeaderTimeout, ReadTimeout time.Duration
	// WriteTimeout bounds writing an answer (a CPU profile or trace gets
	// its duration on top).
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection without a request.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds a request's headers.
	MaxHeaderBytes int
}

// DefaultLimits are the limits of every server of shardns. The clients
// of these endpoints are a few: the kubelet's probes, Prometheus, an
// operator; each asks a short GET and reads a page of about 20 KB. 256
// connections hold under 3 MiB; 32 from one address leave the others
// room; a header sent within 5 s and an answer taken within 10 s are
// far more than a probe's 1 s timeout; an idle keep-alive outlives a
// scrape interval of one minute.
func DefaultLimits() Limits {
	return Limits{MaxConnections: 256, MaxConnectionsPerSource: 32,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 8 << 10}
}

// withDefaults fills l's zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	fill := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	fillD := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	fill(&l.MaxConnections, d.MaxConnections)
	fill(&l.MaxConnectionsPerSource, d.MaxConnectionsPerSource)
	fill(&l.MaxHeaderBytes, d.MaxHeaderBytes)
	fillD(&l.ReadHeaderTimeout, d.ReadHeaderTimeout)
	fillD(&l.ReadTimeout, d.ReadTimeout)
	fillD(&l.WriteTimeout, d.WriteTimeout)
	fillD(&l.IdleTimeout, d.IdleTimeout)
	return l
}

// Counters are the refusals of every HTTP server of a process, by
// server ("http://" and its address).
type Counters struct {
	// Evicted counts connections closed to let a new one in: reason
	// full (the server's bound) or source (the client's own bound).
	Evicted *prometheus.CounterVec
	// Timeouts counts connections closed because a request's line and
	// headers did not arrive within ReadHeaderTimeout (reason read) or
	// its answer was not taken within WriteTimeout (write).
	Timeouts *prometheus.CounterVec
	// Refused counts requests answered 403: reason debug (a /debug/
	// path asked from beyond this host and http.debug).
	Refused *prometheus.CounterVec
}

// NewCounters registers the counters on reg.
func NewCounters(reg prometheus.Registerer) *Counters {
	c := &Counters{
		Evicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "shardns", Subsystem: "http", Name: "evicted_total",
			Help: "Counter of HTTP connections closed to let a new one in, by reason (full, source).",
		}, []string{"server", "reason"}),
		Timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "shardns", Subsystem: "http", Name: "timeouts_total",
			Help: "Counter of HTTP connections closed because a request was not received (read) or its answer not taken (write) in time.",
		}, []string{"server", "reason"}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "shardns", Subsystem: "http", Name: "refused_total",
			Help: "Counter of HTTP requests refused, by reason (debug: a /debug/ path from beyond this host and http.debug).",
		}, []string{"server", "reason"}),
	}
	reg.MustRegister(c.Evicted, c.Timeouts, c.Refused)
	return c
}

// server are the counters of one server; nil c gives counters that count
// nowhere.
func (c *Counters) server(name string) serverCounters {
	if c == nil {
		c = NewCounters(prometheus.NewRegistry())
	}
	return serverCounters{
		evictedFull: c.Evicted.WithLabelValues(name, "full"), evictedSource: c.Evicted.WithLabelValues(name, "source"),
		readTimeouts: c.Timeouts.WithLabelValues(name, "read"), writeTimeouts: c.Timeouts.WithLabelValues(name, "write"),
	}
}
