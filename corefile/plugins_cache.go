package corefile

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shardns/shardns/config"
)

// CoreDNS's cache defaults, used where the plugin leaves them out.
const (
	coreDNSCacheMaxTTL    = 3600
	coreDNSCacheDenialTTL = 1800
	coreDNSCacheCapacity  = 9984 // of each of the success and denial caches
)

// cacheSpec collects the cache plugin's values before they are set.
type cacheSpec struct {
	successCap, denialCap int // -1: not written
	minSuccess, minDenial int // -1: not written
}

// cachePlugin maps cache [TTL] [ZONES] and its options to cache.*.
func (c *converter) cachePlugin(s *server, d *Directive) {
	if !c.claim("cache", d, "response cache") {
		return
	}
	ca := &c.cfg.Cache
	ca.Enabled = true
	c.global(s, d, "cache.*")
	ca.MaxTTL, ca.DenialMaxTTL = coreDNSCacheMaxTTL, coreDNSCacheDenialTTL
	args := d.Args
	if len(args) > 0 {
		if n, err := strconv.Atoi(args[0]); err == nil && n >= 0 {
			ca.MaxTTL, ca.DenialMaxTTL = n, n
			args = args[1:]
		}
	}
	ca.Zones = c.cacheZones(s, d, args)
	spec := cacheSpec{successCap: -1, denialCap: -1, minSuccess: -1, minDenial: -1}
	c.options(d, func(o *Directive) bool { return c.cacheOption(ca, &spec, o) })
	switch {
	case spec.minSuccess >= 0 && spec.minDenial >= 0 && spec.minSuccess != spec.minDenial:
		c.unmapped(d.place(), "cache minimum TTLs %d and %d: shardns has one cache.minTTL", spec.minSuccess, spec.minDenial)
	case spec.minSuccess >= 0:
		ca.MinTTL = spec.minSuccess
	case spec.minDenial >= 0:
		ca.MinTTL = spec.minDenial
	}
	if spec.successCap >= 0 || spec.denialCap >= 0 {
		ca.Size = max(spec.successCap, 0) + max(spec.denialCap, 0)
		if spec.successCap < 0 || spec.denialCap < 0 {
			ca.Size += coreDNSCacheCapacity
		}
		c.note(d.place(), "cache capacities: cache.size %d holds answers and denials together", ca.Size)
	}
}

func (c *converter) cacheOption(ca *config.CacheConfig, spec *cacheSpec, o *Directive) bool {
	switch o.Name {
	case "success", "denial":
		n := intArgs(o.Args)
		if n == nil || len(n) > 3 || n[0] <= 0 {
			c.unmapped(o.place(), "%s %s: CAPACITY [TTL [MINTTL]] in numbers", o.Name, strings.Join(o.Args, " "))
			return true
		}
		capacity, ttl, minTTL := &spec.successCap, &ca.MaxTTL, &spec.minSuccess
		if o.Name == "denial" {
			capacity, ttl, minTTL = &spec.denialCap, &ca.DenialMaxTTL, &spec.minDenial
		}
		*capacity = n[0]
		if len(n) > 1 {
			*ttl = n[1]
		}
		if len(n) > 2 {
			*minTTL = n[2]
		}
	case "prefetch":
		c.prefetch(ca, o)
	case "serve_stale":
		ca.ServeStale = config.Duration(time.Hour)
		if len(o.Args) > 0 {
			if dur, ok := c.duration(o, 0); ok {
				ca.ServeStale = config.Duration(dur)
			}
		}
		if len(o.Args) < 2 || o.Args[1] != "verify" {
			c.note(o.place(), "serve_stale: shardns asks the upstream first and serves a stale answer only when none answers (CoreDNS's verify mode)")
		}
	case "servfail":
		if dur, ok := c.duration(o, 0); ok {
			if dur > 5*time.Minute {
				c.unmapped(o.place(), "servfail %s: CoreDNS allows at most 5m", o.Args[0])
				return true
			}
			ca.ServfailTTL = config.Duration(dur)
		}
	case "keepttl":
		ca.KeepTTL = true
	case "disable":
		c.deferred = append(c.deferred, func() { c.cacheDisable(o) })
	default:
		return false
	}
	return true
}

// cacheZones maps cache ZONES to cache.zones: none, the root, or the
// block's own zones (CoreDNS's default; the block gets no other names)
// cache every name the block forwards.
func (c *converter) cacheZones(s *server, d *Directive, args []string) []string {
	var zones []string
	all, root := true, false
	for _, a := range args {
		z, err := NormalizeZone(a)
		if err != nil {
			c.unmapped(d.place(), "cache zone %s: %v", a, err)
			continue
		}
		if z != "." && !config.ValidDomain(z) {
			c.unmapped(d.place(), "cache zone %s: shardns caches host-style domain names (letters, digits, - and _)", a)
			continue
		}
		root = root || z == "."
		all = all && slices.Contains(s.blockZones, z)
		zones = append(zones, z)
	}
	if all || root {
		return nil
	}
	return zones
}

// prefetch maps prefetch AMOUNT [DURATION] [PERCENTAGE%].
func (c *converter) prefetch(ca *config.CacheConfig, o *Directive) {
	n := intArgs(o.Args[:min(1, len(o.Args))])
	if n == nil || n[0] <= 0 {
		c.unmapped(o.place(), "prefetch %s: needs a number of hits", strings.Join(o.Args, " "))
		return
	}
	ca.PrefetchHits = n[0]
	for _, a := range o.Args[1:] {
		if p, ok := strings.CutSuffix(a, "%"); ok {
			v, err := strconv.Atoi(p)
			if err != nil || v < 0 || v > 100 {
				c.unmapped(o.place(), "prefetch %s: a percentage from 0 to 100", a)
				continue
			}
			ca.PrefetchPercent = v
			continue
		}
		if dur, err := time.ParseDuration(a); err != nil || dur != time.Minute {
			c.unmapped(o.place(), "prefetch %s: shardns counts an answer's hits over its whole life, not per period", a)
		}
	}
}

// cacheDisable accepts "disable success|denial ZONES" for the kubernetes
// zones: shardns never puts their answers in the response cache.
func (c *converter) cacheDisable(o *Directive) {
	k := c.cfg.Kubernetes
	cluster := k.AllZones()
	ok := k.Enabled && len(o.Args) >= 2 && (o.Args[0] == "success" || o.Args[0] == "denial")
	for _, a := range o.Args[min(1, len(o.Args)):] {
		z, err := NormalizeZone(a)
		if err != nil || !underAny(z, cluster) {
			ok = false
		}
	}
	if !ok {
		c.unmapped(o.place(), "disable %s: shardns caches every forwarded answer", strings.Join(o.Args, " "))
		return
	}
	c.note(o.place(), "disable %s: shardns answers cluster names from its zones, not from the response cache (answers asked of another replica are kept at most their TTL)",
		strings.Join(o.Args, " "))
}

// underAny reports whether z is one of zones or below one.
func underAny(z string, zones []string) bool {
	for _, p := range zones {
		if z == p || strings.HasSuffix(z, "."+p) {
			return true
		}
	}
	return false
}

// intArgs reads every argument as a non-negative number; nil when one is
// not.
func intArgs(args []string) []int {
	if len(args) == 0 {
		return nil
	}
	out := make([]int, len(args))
	for i, a := range args {
		n, err := strconv.Atoi(a)
		if err != nil || n < 0 {
			return nil
		}
		out[i] = n
	}
	return out
}
