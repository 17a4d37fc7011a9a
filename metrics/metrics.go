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
	// Sizes of requests and responses in bytes: server, zone, view, proto.
	RequestSize, ResponseSize *prometheus.HistogramVec
	Panics                    prometheus.Counter
	Autopath                  *prometheus.CounterVec // server: searches answered on the server
	DNS64Translated           *prometheus.CounterVec // server: AAAA answers synthesised from A records
	// RRL counts UDP answers over a response rate limit: server, class
	// (answer, nodata, nxdomain, referral, error), action (slipped,
	// dropped, reported).
	RRL *prometheus.CounterVec
	// TCPEvicted counts connections closed to let a new one in: server,
	// reason (full: the listener's bound; source: the client's own bound).
	TCPEvicted *prometheus.CounterVec
	// HTTPSRefused counts DNS over HTTPS streams and requests refused:
	// server, reason (streams: over a connection's stream limit; inflight:
	// every place answering; evicted: a body still arriving gave its place
	// to a newer request; body_timeout: a body not in within its time).
	HTTPSRefused *prometheus.CounterVec
}

// ACL are the access lists' metrics, as CoreDNS's acl plugin's.
type ACL struct {
	Blocked, Filtered, Dropped *prometheus.CounterVec // server, zone, view
	Allowed                    *prometheus.CounterVec // server, view
}

// Template are the record templates' metrics, as CoreDNS's template
// plugin's.
type Template struct {
	Matches *prometheus.CounterVec // server, zone, view, class, type: questions a template answered
	// Record templates that failed to execute, and those whose text was
	// no valid record: server, zone, view, class, type, section, template.
	TemplateFailures, RRFailures *prometheus.CounterVec
}

// Forward are the forwarder's metrics.
type Forward struct {
	Requests         *prometheus.CounterVec   // to
	Responses        *prometheus.CounterVec   // to, rcode
	Duration         *prometheus.HistogramVec // to, rcode
	HealthcheckFails *prometheus.CounterVec   // to
	ConcurrentReject prometheus.Counter
	// Connections to upstreams taken for a query over a stream, by
	// whether one kept open was reused (hits) or a new one opened
	// (misses): to, proto (tcp, tcp-tls for tls://, https for https://).
	ConnCacheHits, ConnCacheMisses *prometheus.CounterVec
}

// Cache are the response cache's metrics.
type Cache struct {
	Entries  *prometheus.GaugeVec   // server, type (success | denial)
	Hits     *prometheus.CounterVec // server, type
	Misses   *prometheus.CounterVec // server
	Stale    *prometheus.CounterVec // server
	Prefetch *prometheus.CounterVec // server
}

// Cluster are the sharding metrics.
type Cluster struct {
	Dispatches       *prometheus.CounterVec // result: queries sent to other replicas
	DispatchDuration prometheus.Histogram
	Handoffs         *prometheus.CounterVec // direction: gained | lost
	// How long the zones ring changes gained took to load: to compare
	// with cluster.handoffGrace, after which their old owners drop them.
	GainLoadDuration prometheus.Histogram
	// Zones lost on ring changes that this replica still answers through
	// cluster.handoffGrace; once none is left, their release (the kept
	// zones rebuilt, freed memory returned) follows.
	ZonesInGrace prometheus.Gauge
	// Zones gained while the API server did not answer, loaded from the
	// replicas that held them, by result: loaded, empty (a namespace
	// without objects, so said by a replica that held it), not_held (no
	// replica asked held it), failed (none answered).
	ZonesHandedOver *prometheus.CounterVec
	// Per owner, so a node-local cache shows where its misses go.
	OwnerDispatches *prometheus.CounterVec   // owner, result
	OwnerDuration   *prometheus.HistogramVec // owner
	// The cache of owners' answers: hit ratio = hits / (hits + misses).
	CacheHits, CacheMisses prometheus.Counter
	// Messages between replicas a full mailbox dropped, by mailbox.
	MailboxDropped *prometheus.CounterVec
	// Replies from other replicas dropped because they answered no
	// question this replica asked of their sender, by reason (see
	// actors/dispatch).
	RepliesDropped *prometheus.CounterVec
	// Processes turned away from the ring or the remote port, by reason
	// (see cluster/trust).
	RejectedMembers *prometheus.CounterVec
	// Members found down (their remote port refused a connection) before
	// gossip declared them dead (see cluster/liveness).
	MembersDown prometheus.Counter
	// Caches told, not timed (see actors/dispatch coherence.go): the
	// owners' messages of changed names sent to askers, received from
	// owners, the zone changes applied, and the messages found missing
	// (everything cached forgotten then).
	InvalidationsSent, InvalidationsReceived, InvalidationsApplied, InvalidationsLost prometheus.Counter
	// Askers noted as interested in this replica's zones, and entries
	// dropped by the bound (their askers told to drop the zone).
	InterestEntries prometheus.Gauge
	InterestDropped prometheus.Counter
	// DNSProgramming is how long after a change in the API it was
	// answered, by tier: owner (published in its zone), replica and
	// nodelocal (the caches of other processes told). CoreDNS exports
	// the like for headless services.
	DNSProgramming *prometheus.HistogramVec
}

// Kubernetes are the Kubernetes source's metrics.
type Kubernetes struct {
	// Events its watches delivered (the initial list's objects included),
	// by kind and type (add | update | delete): with sharded watches, about
	// 1/N of the cluster's per replica.
	Events *prometheus.CounterVec
	// ShardedWatch is 1 while the watches select the namespaces this
	// replica owns, 0 while they take every object.
	ShardedWatch prometheus.Gauge
	// Skipped counts what the API served malformed for DNS, by kind and
	// what: object (not served; a previous version keeps serving) or
	// field (the object served without it, e.g. an external IP that is
	// not an address).
	Skipped *prometheus.CounterVec
	// MeshSkipped counts ServiceEntry hosts (of the Istio or the manifest
	// source) not answered on purpose, by why (zone.Skip*): outside
	// istio.zones, a wildcard over a public suffix, not exported to every
	// namespace, inside a cluster zone, a misplaced wildcard.
	MeshSkipped *prometheus.CounterVec
	// MeshNamesWithheld counts directories whose mesh host names a
	// replica did not tell node-local processes: more than 1 MiB of them
	// (actors/dispatch meshnames.go).
	MeshNamesWithheld prometheus.Counter
}

// All is every metric of a node.
type All struct {
	DNS        *DNS
	ACL        *ACL
	Template   *Template
	Forward    *Forward
	Cache      *Cache
	Cluster    *Cluster
	Kubernetes *Kubernetes
	// ReloadFailed counts configuration changes rejected (CoreDNS's
	// coredns_reload_failed_total): the running configuration kept
	// serving.
	ReloadFailed prometheus.Counter
}

// New registers every metric on a new registry and returns both.
func New(version string) (*prometheus.Registry, *All) {
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
	sizeBuckets := []float64{0, 100, 200, 300, 400, 511, 1023, 2047, 4095, 8291, 16e3, 32e3, 48e3, 64e3}
	d.RequestSize = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "shardns", Subsystem: "dns", Name: "request_size_bytes",
		Help: "Size of the EDNS0 UDP buffer in bytes (64K for TCP) per zone and protocol.", Buckets: sizeBuckets,
	}, []string{"server", "zone", "view", "proto"})
	d.ResponseSize = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "shardns", Subsystem: "dns", Name: "response_size_bytes",
		Help: "Size of the returned response in bytes.", Buckets: sizeBuckets,
	}, []string{"server", "zone", "view", "proto"})
	d.Panics = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "shardns", Name: "panics_total", Help: "A metrics that counts the number of panics.",
	})
	d.Autopath = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "shardns", Subsystem: "autopath", Name: "success_total",
		Help: "Counter of requests that did autopath.",
	}, []string{"server"})
	d.DNS64Translated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "shardns", Subsystem: "dns64", Name: "requests_translated_total",
		Help: "Counter of DNS requests translated by dns64.",
	}, []string{"server"})
	d.RRL = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "shardns", Subsystem: "dns", Name: "rrl_responses_total",
		Help: "Counter of UDP responses over a response rate limit, by class and action.",
	}, []string{"server", "class", "action"})
	d.TCPEvicted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "shardns", Subsystem: "dns", Name: "tcp_evicted_total",
		Help: "Counter of idle TCP, TLS and HTTPS connections closed to let a new one in, by reason.",
	}, []string{"server", "reason"})
	d.HTTPSRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "shardns", Subsystem: "dns", Name: "https_refused_total",
		Help: "Counter of DNS over HTTPS streams and requests refused by the listener's bounds, by reason.",
	}, []string{"server", "reason"})
	reg.MustRegister(d.RequestSize, d.ResponseSize, d.Panics, d.Autopath, d.DNS64Translated, d.RRL, d.TCPEvicted, d.HTTPSRefused)
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "shardns", Name: "build_info",
		Help: "A metric with a constant '1' value labeled by version and goversion.",
	}, []string{"version"})
	build.WithLabelValues(version).Set(1)
	reg.MustRegister(d.Requests, d.Responses, d.Duration, d.Dropped, build)
	aclCounter := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "acl",
			Name: name, Help: help}, labels)
		reg.MustRegister(c)
		return c
	}
	acl := &ACL{
		Blocked:  aclCounter("blocked_requests_total", "Counter of DNS requests being blocked.", "server", "zone", "view"),
		Filtered: aclCounter("filtered_requests_total", "Counter of DNS requests being filtered.", "server", "zone", "view"),
		Dropped:  aclCounter("dropped_requests_total", "Counter of DNS requests being dropped.", "server", "zone", "view"),
		Allowed:  aclCounter("allowed_requests_total", "Counter of DNS requests being allowed.", "server", "view"),
	}
	templateCounter := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "template",
			Name: name, Help: help}, labels)
		reg.MustRegister(c)
		return c
	}
	tmpl := &Template{
		Matches: templateCounter("matches_total", "Counter of template regex matches.", "server", "zone", "view", "class", "type"),
		TemplateFailures: templateCounter("template_failures_total", "Counter of go template failures.",
			"server", "zone", "view", "class", "type", "section", "template"),
		RRFailures: templateCounter("rr_failures_total", "Counter of mis-templated RRs.",
			"server", "zone", "view", "class", "type", "section", "template"),
	}
	f := &Forward{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "forward",
			Name: "requests_total", Help: "Counter of requests made per upstream."}, []string{"to"}),
		Responses: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "forward",
			Name: "responses_total", Help: "Counter of responses received per upstream."}, []string{"to", "rcode"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "shardns", Subsystem: "forward",
			Name: "request_duration_seconds", Help: "Histogram of the time each request took.",
			Buckets: prometheus.ExponentialBuckets(0.00025, 2, 16)}, []string{"to", "rcode"}),
		HealthcheckFails: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "forward",
			Name: "healthcheck_failures_total", Help: "Counter of the number of failed healthchecks."}, []string{"to"}),
		ConcurrentReject: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "forward",
			Name: "max_concurrent_rejects_total", Help: "Counter of the number of queries rejected because the concurrent queries were at maximum."}),
	}
	f.ConnCacheHits = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "forward",
		Name: "conn_cache_hits_total", Help: "Counter of connection cache hits per upstream and protocol."}, []string{"to", "proto"})
	f.ConnCacheMisses = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "forward",
		Name: "conn_cache_misses_total", Help: "Counter of connection cache misses per upstream and protocol."}, []string{"to", "proto"})
	reg.MustRegister(f.Requests, f.Responses, f.Duration, f.HealthcheckFails, f.ConcurrentReject,
		f.ConnCacheHits, f.ConnCacheMisses)
	c := &Cache{
		Entries: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "shardns", Subsystem: "cache",
			Name: "entries", Help: "The number of elements in the cache."}, []string{"server", "type"}),
		Hits: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "cache",
			Name: "hits_total", Help: "The count of cache hits."}, []string{"server", "type"}),
		Misses: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "cache",
			Name: "misses_total", Help: "The count of cache misses."}, []string{"server"}),
		Stale: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "cache",
			Name: "served_stale_total", Help: "The number of requests served from stale cache entries."}, []string{"server"}),
		Prefetch: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "cache",
			Name: "prefetch_total", Help: "The number of times the cache has prefetched a cached item."}, []string{"server"}),
	}
	reg.MustRegister(c.Entries, c.Hits, c.Misses, c.Stale, c.Prefetch)
	cl := &Cluster{
		Dispatches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "cluster",
			Name: "dispatches_total", Help: "Questions sent to the replicas owning their zone, by result."}, []string{"result"}),
		DispatchDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "shardns", Subsystem: "cluster",
			Name: "dispatch_duration_seconds", Help: "Time to get an owner's answer.",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)}),
		Handoffs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "cluster",
			Name: "handoffs_total", Help: "Zones gained or lost on ring changes."}, []string{"direction"}),
		GainLoadDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "shardns", Subsystem: "cluster",
			Name: "gain_load_duration_seconds", Help: "Time from a ring change to the zones it gained serving.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 12)}),
	}
	cl.ZonesInGrace = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "shardns", Subsystem: "cluster",
		Name: "zones_in_grace", Help: "Zones lost on ring changes that this replica still answers through cluster.handoffGrace."})
	cl.ZonesHandedOver = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "cluster",
		Name: "zones_handed_over_total", Help: "Zones gained while the API server did not answer, asked of the replicas that held them, by result."},
		[]string{"result"})
	cl.OwnerDispatches = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "cluster",
		Name: "owner_dispatches_total", Help: "Questions sent to each owning replica, by result."}, []string{"owner", "result"})
	cl.OwnerDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "shardns", Subsystem: "cluster",
		Name: "owner_duration_seconds", Help: "Time to get each owning replica's answer.",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16)}, []string{"owner"})
	cl.CacheHits = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "cluster",
		Name: "cache_hits_total", Help: "Names of zones held elsewhere answered from the cache of owners' answers."})
	cl.CacheMisses = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "cluster",
		Name: "cache_misses_total", Help: "Names of zones held elsewhere that had to be asked of an owner."})
	cl.MailboxDropped = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "cluster",
		Name: "mailbox_dropped_total", Help: "Messages between replicas dropped because the receiving mailbox was full."},
		[]string{"mailbox"})
	cl.RepliesDropped = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "cluster",
		Name: "replies_dropped_total", Help: "Replies from other replicas dropped: no question waits under their id (late, or guessed), " +
			"they came from another replica or actor than the one asked, or they do not echo the question."},
		[]string{"reason"})
	cl.RejectedMembers = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "cluster",
		Name: "rejected_members_total", Help: "Join attempts, gossip and remote connections or messages refused, by reason."},
		[]string{"reason"})
	cl.MembersDown = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "cluster",
		Name: "members_down_total", Help: "Members found down because their remote port refused a connection; " +
			"they own no zone here until they serve again or gossip declares them dead."})
	coherence := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "cluster", Name: name, Help: help})
		reg.MustRegister(c)
		return c
	}
	cl.InvalidationsSent = coherence("invalidations_sent_total", "Messages telling askers which names of this replica's zones changed.")
	cl.InvalidationsReceived = coherence("invalidations_received_total", "Messages from owners telling which names of their zones changed.")
	cl.InvalidationsApplied = coherence("invalidations_applied_total", "Zone changes told by owners and applied to the caches of their answers.")
	cl.InvalidationsLost = coherence("invalidations_lost_total",
		"Messages from owners found missing; the caches of owners' answers forgot everything each time.")
	cl.InterestDropped = coherence("interest_dropped_total",
		"Askers' interest in zones dropped beyond the bound; the asker was told to drop the zone.")
	cl.InterestEntries = prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "shardns", Subsystem: "cluster",
		Name: "interest_entries", Help: "Askers noted as interested in this replica's zones (zone, asker)."})
	cl.DNSProgramming = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "shardns",
		Name: "dns_programming_duration_seconds", Help: "Time from a change in the API to its answer, by tier: owner, replica, nodelocal.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 20)}, []string{"tier"})
	reg.MustRegister(cl.InterestEntries, cl.DNSProgramming)
	reg.MustRegister(cl.Dispatches, cl.DispatchDuration, cl.Handoffs, cl.GainLoadDuration, cl.ZonesInGrace, cl.ZonesHandedOver, cl.OwnerDispatches, cl.OwnerDuration,
		cl.CacheHits, cl.CacheMisses, cl.MailboxDropped, cl.RepliesDropped, cl.RejectedMembers, cl.MembersDown)
	k := &Kubernetes{
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "kubernetes",
			Name: "events_total", Help: "Objects the Kubernetes watches delivered, by kind and event type."}, []string{"kind", "type"}),
		ShardedWatch: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "shardns", Subsystem: "kubernetes",
			Name: "sharded_watch", Help: "1 while the watches select only the namespaces this replica owns, 0 while they take every object."}),
	}
	k.Skipped = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "kubernetes",
		Name: "skipped_total", Help: "Objects (or parts of objects) the API served malformed for DNS and that are not served, by kind and what."},
		[]string{"kind", "what"})
	k.MeshSkipped = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "istio",
		Name: "skipped_hosts_total", Help: "ServiceEntry hosts not answered on purpose, by why, counted once per change of their entry."},
		[]string{"why"})
	k.MeshNamesWithheld = prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "istio",
		Name: "names_withheld_total", Help: "Directories whose mesh host names were too many to tell node-local processes, " +
			"which then forward mesh names instead."})
	reg.MustRegister(k.Events, k.ShardedWatch, k.Skipped, k.MeshSkipped, k.MeshNamesWithheld)
	reloadFailed := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "shardns", Name: "reload_failed_total",
		Help: "Counter of configuration changes rejected; the running configuration kept serving."})
	reg.MustRegister(reloadFailed)
	return reg, &All{DNS: d, ACL: acl, Template: tmpl, Forward: f, Cache: c, Cluster: cl, Kubernetes: k, ReloadFailed: reloadFailed}
}
