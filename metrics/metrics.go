// Package metrics defines the Prometheus metrics of shardns. Names and
// labels follow CoreDNS's, with the shardns_ prefix, so dashboards and
// alerts carry over by renaming the prefix.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// DNS are the per-query metrics.
type DNS struct {
	Requests  *prometheus.CounterVec   // server, zone, view, proto, family, type
	Responses *prometheus.CounterVec   // server, zone, view, rcode, plugin
	Duration  *prometheus.HistogramVec // server, zone, view, type
	Dropped   *prometheus.CounterVec   // server, reason: packets not answered
}

// New registers every metric on a new registry and returns both.
func New(version string) (*prometheus.Registry, *DNS) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	d := &DNS{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "shardns", Subsystem: "dns", Name: "requests_total",
			Help: "Counter of DNS requests made per zone, protocol and family.",
		}, []string{"server", "zone", "view", "proto", "family", "type"}),
		Responses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "shardns", Subsystem: "dns", Name: "responses_total",
			Help: "Counter of response status codes.",
		}, []string{"server", "zone", "view", "rcode", "plugin"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "shardns", Subsystem: "dns", Name: "request_duration_seconds",
			Help:    "Histogram of the time (in seconds) each request took per zone.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 16),
		}, []string{"server", "zone", "view", "type"}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "shardns", Subsystem: "dns", Name: "dropped_total",
			Help: "Counter of packets dropped without an answer, by reason.",
		}, []string{"server", "reason"}),
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "shardns", Name: "build_info",
		Help: "A metric with a constant '1' value labeled by version and goversion.",
	}, []string{"version"})
	build.WithLabelValues(version).Set(1)
	reg.MustRegister(d.Requests, d.Responses, d.Duration, d.Dropped, build)
	return reg, d
}
