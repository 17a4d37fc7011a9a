package node

import (
	"crypto/tls"
	"fmt"
	"slices"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/acl"
	"github.com/shardns/shardns/cache"
	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/forward"
	"github.com/shardns/shardns/hosts"
	"github.com/shardns/shardns/metrics"
	"github.com/shardns/shardns/query"
	"github.com/shardns/shardns/rewrite"
	"github.com/shardns/shardns/template"
	"github.com/shardns/shardns/zone"
)

// buildPlane compiles the rewrite rules and the templates, reads the
// hosts entries and files, and sets the chaos answers of the core. Nothing runs until
// startPlane, so an error later in newCore leaves nothing behind.
func (c *core) buildPlane(nodeName string) error {
	c.nodeName = nodeName
	if err := c.buildResolvers(); err != nil {
		return err
	}
	if err := c.buildFederation(); err != nil {
		return err
	}
	return c.buildTopology()
}

// buildResolvers compiles the plane keys a view has its own of too:
// rewrite rules, templates, hosts and access lists.
func (c *core) buildResolvers() error {
	var err error
	if c.rewrite, err = rewrite.Compile(c.cfg.Rewrite); err != nil {
		return err
	}
	if c.template, err = template.Compile(c.cfg.Template); err != nil {
		return err
	}
	if h := c.cfg.Hosts; len(h.Entries) > 0 || len(h.Files) > 0 {
		opts := hosts.Options{TTL: uint32(h.TTL), NoReverse: h.NoReverse, Zones: fqdns(h.Zones), Fallthrough: fqdns(h.Fallthrough)}
		c.hosts, err = hosts.New(hosts.Config{Options: opts, Entries: h.Entries, Files: h.Files,
			Interval: h.Interval.D(), Logger: c.log.With("component", "hosts")})
		if err != nil {
			return err
		}
		c.warnHostsShadow(opts)
	}
	c.acl = acl.Compile(c.cfg.ACL)
	if ch := c.cfg.Chaos; ch.Enabled {
		c.chaos = &query.Chaos{Version: ch.Version, Hostname: c.nodeName, Authors: ch.Authors}
		if c.chaos.Version == "" {
			c.chaos.Version = "shardns-" + Version
		}
	}
	return nil
}

// warnHostsShadow logs when the hosts entries answer SERVFAIL for cluster
// names they have no entry for: CoreDNS does the same (hosts comes before
// kubernetes), but it is rarely what is meant.
func (c *core) warnHostsShadow(opts hosts.Options) {
	empty := hosts.NewSnapshot(opts, nil)
	for _, d := range c.answer.Domains.Cluster {
		if _, v := empty.Lookup("no-such-name."+d, dns.TypeA); v == hosts.Fail {
			c.log.Warn("hosts.zones covers a cluster domain without hosts.fallthrough: its names get SERVFAIL "+
				"unless a hosts entry has them (add the domain, or \".\", to hosts.fallthrough)", "domain", d)
		}
	}
}

// startPlane starts the checks of the hosts files once newCore has built
// the core; it passes newCore's result through.
func (c *core) startPlane(built *core, err error) (*core, error) {
	if err != nil {
		return nil, err
	}
	if c.hosts != nil {
		c.hosts.Start()
	}
	for _, p := range c.planes() {
		if p.hosts != nil {
			p.hosts.Start()
		}
	}
	if c.locality != nil {
		c.locality.start()
	}
	if c.topology != nil {
		c.topology.start()
	}
	return built, nil
}

// stopPlane stops what startPlane started.
func (c *core) stopPlane() {
	if c.hosts != nil {
		c.hosts.Stop()
	}
	for _, p := range c.planes() {
		if p.hosts != nil {
			p.hosts.Stop()
		}
	}
	if c.locality != nil {
		c.locality.stop()
	}
	if c.topology != nil {
		c.topology.stop()
	}
	if c.clientWatch != nil {
		c.clientWatch.Stop()
	}
}

func fqdns(zones []string) []string {
	var out []string
	for _, z := range zones {
		out = append(out, zone.Fqdn(z))
	}
	return out
}

// newUpstream builds the default forwarder and each stub domain's, with
// their caches, or nil when no upstream is configured at all. An upstream
// that is this server itself is an error. Every address is checked before
// any forwarder starts.
func (c *core) newUpstream(listen []string, m *metrics.Forward) (*query.Upstream, error) {
	f := c.cfg.Forward
	// The extra servers (plain DNS, DNS over TLS and over HTTPS) answer
	// through the same handler: an upstream on one of them is a loop too.
	listen = slices.Clone(listen)
	for _, s := range c.cfg.Servers {
		switch s.Transport {
		case "dns":
			listen = append(listen, s.Listen...)
		case "tls", "https":
			for _, a := range s.Listen {
				listen = append(listen, s.Transport+"://"+a)
			}
		}
	}
	addrs, err := forward.ParseUpstreams(f.Upstreams, nil)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := loadUpstreamTLS(f.TLS, len(addrs))
	if err != nil {
		return nil, fmt.Errorf("forward.%w", err)
	}
	local := forward.LocalAddrs() // the interfaces, listed once for every check
	if err := forward.CheckLoop(addrs, listen, local); err != nil {
		return nil, err
	}
	stubAddrs := make([][]string, len(f.Stubs))
	stubTLS := make([]*tls.Config, len(f.Stubs))
	for i, s := range f.Stubs {
		if stubAddrs[i], err = forward.ParseUpstreams(s.Upstreams, nil); err != nil {
			return nil, fmt.Errorf("forward.stubs[%d]: %w", i, err)
		}
		if stubTLS[i], err = loadUpstreamTLS(s.TLS, len(stubAddrs[i])); err != nil {
			return nil, fmt.Errorf("forward.stubs[%d].%w", i, err)
		}
		if err := forward.CheckLoop(stubAddrs[i], listen, local); err != nil {
			return nil, fmt.Errorf("forward.stubs[%d]: %w", i, err)
		}
	}
	if len(addrs) == 0 && len(f.Stubs) == 0 {
		c.log.Info("no forward.upstreams: names outside the cluster zones get REFUSED")
		return nil, nil
	}
	fall := fqdns(c.cfg.Kubernetes.Fallthrough)
	var final []string
	if e := c.cfg.Kubernetes.External; e != nil {
		fall, final = append(fall, fqdns(e.Fallthrough)...), fqdns(e.Zones)
	}
	u := &query.Upstream{Deadline: f.Deadline.D(), Now: time.Now, Fallthrough: fall, Final: final, Except: fqdns(f.Except)}
	if len(addrs) > 0 {
		if c.forwarder, err = c.newForwarder(addrs, f.Policy, tlsCfg, f.ForwardOptions, m); err != nil {
			return nil, fmt.Errorf("forward.%w", err)
		}
		u.Forwarder, u.Cache = c.forwarder, c.newCache()
		c.log.Info("forwarding names outside the cluster", "upstreams", addrs, "policy", f.Policy, "cache", c.cfg.Cache.Enabled)
	} else {
		c.log.Info("no forward.upstreams: names outside the cluster and stub zones get REFUSED")
	}
	for i, s := range f.Stubs {
		policy := s.Policy
		if policy == "" {
			policy = f.Policy
		}
		next, err := config.ParseRcodes(s.Next)
		if err != nil {
			return nil, fmt.Errorf("forward.stubs[%d].next: %w", i, err)
		}
		fw, err := c.newForwarder(stubAddrs[i], policy, stubTLS[i], s.ForwardOptions, m)
		if err != nil {
			return nil, fmt.Errorf("forward.stubs[%d].%w", i, err)
		}
		c.stubs = append(c.stubs, fw)
		stub := &query.Upstream{Forwarder: fw, Cache: c.newCache(), Deadline: f.Deadline.D(), Now: time.Now,
			Except: fqdns(s.Except), Next: next}
		for _, z := range fqdns(s.Zones) {
			u.Stubs = append(u.Stubs, query.Stub{Zone: z, Upstream: stub})
		}
		c.log.Info("forwarding a stub domain", "zones", s.Zones, "upstreams", stubAddrs[i], "policy", policy)
	}
	return u, nil
}

// loadUpstreamTLS reads the files of a forwarder's tls:// and https://
// upstreams; an error starts with the key (tls.caFile: ...) of the file
// that failed.
func loadUpstreamTLS(t config.UpstreamTLSConfig, upstreams int) (*tls.Config, error) {
	cfg, err := forward.LoadTLS(forward.TLSFiles{ServerName: t.ServerName, CAFile: t.CAFile,
		CertFile: t.CertFile, KeyFile: t.KeyFile}, upstreams)
	if err != nil {
		return nil, fmt.Errorf("tls.%w", err)
	}
	return cfg, nil
}

// newForwarder starts a forwarder whose attempts count in the forward
// metrics under their upstream's address. opts are the default
// forwarder's or a stub's own; the rest of forward.* is shared.
func (c *core) newForwarder(addrs []string, policy string, tlsCfg *tls.Config, opts config.ForwardOptions,
	m *metrics.Forward) (*forward.Forwarder, error) {
	f := c.cfg.Forward
	failover, err := config.ParseRcodes(opts.Failover)
	if err != nil {
		return nil, fmt.Errorf("failover: %w", err)
	}
	fw := forward.New(forward.Config{Upstreams: addrs, Policy: policy, Timeout: f.Timeout.D(),
		MaxConcurrent: f.MaxConcurrent, HealthCheck: f.HealthCheck.D(), MaxFails: f.MaxFails,
		TLS: tlsCfg, MaxIdleConns: f.MaxIdleConns, Expire: f.Expire.D(), MaxAge: f.MaxAge.D(),
		ForceTCP: opts.ForceTCP, PreferUDP: opts.PreferUDP, Failover: failover,
		Logger: c.log.With("component", "forward"),
		OnConn: func(to, proto string, reused bool) {
			if reused {
				m.ConnCacheHits.WithLabelValues(to, proto).Inc()
			} else {
				m.ConnCacheMisses.WithLabelValues(to, proto).Inc()
			}
		},
		OnResult: func(to string, rcode int, err error, took time.Duration) {
			m.Requests.WithLabelValues(to).Inc()
			if err != nil {
				m.HealthcheckFails.WithLabelValues(to).Inc()
				return
			}
			rc := dns.RcodeToString[rcode]
			m.Responses.WithLabelValues(to, rc).Inc()
			m.Duration.WithLabelValues(to, rc).Observe(took.Seconds())
		}})
	return fw, nil
}

// allForwarders lists the default forwarder, if any, and the stubs'.
func (c *core) allForwarders() []*forward.Forwarder {
	out := append([]*forward.Forwarder(nil), c.stubs...)
	if c.forwarder != nil {
		out = append(out, c.forwarder)
	}
	for _, p := range c.planes() {
		out = append(out, p.allForwarders()...)
	}
	return out
}

// newCache is a forwarder's cache, nil when caching is off.
func (c *core) newCache() *cache.Cache {
	cc := c.cfg.Cache
	if !cc.Enabled {
		return nil
	}
	sec := func(s int) time.Duration { return time.Duration(s) * time.Second }
	return cache.New(cache.Config{Size: cc.Size, MaxBytes: cc.Bytes(), SuccessMaxTTL: sec(cc.MaxTTL), DenialMaxTTL: sec(cc.DenialMaxTTL),
		MinTTL: sec(cc.MinTTL), PrefetchHits: cc.PrefetchHits, PrefetchPercent: cc.PrefetchPercent,
		ServeStale: cc.ServeStale.D(), ServfailTTL: cc.ServfailTTL.D(), KeepTTL: cc.KeepTTL, Zones: cc.Zones})
}
