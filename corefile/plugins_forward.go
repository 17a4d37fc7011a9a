package corefile

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/shardns/shardns/config"
)

// forwardSpec is a forward or proxy plugin read into shardns's terms.
type forwardSpec struct {
	zones     []string // "." alone: every name (forward.upstreams)
	upstreams []string
	policy    string
	maxFails  *int
	health    *config.Duration
	maxConc   *int
	tls       forwardTLS
	opts      forwardOpts
}

func (c *converter) forwardPlugin(s *server, d *Directive) {
	spec, ok := c.forwardTarget(s, d)
	if !ok {
		return
	}
	c.options(d, func(o *Directive) bool {
		if c.tlsOption(s, o, &spec.tls) || c.forwardOption(o, &spec.opts) {
			return true
		}
		switch o.Name {
		case "policy":
			if len(o.Args) == 1 && slices.Contains([]string{"random", "round_robin", "sequential"}, o.Args[0]) {
				spec.policy = o.Args[0]
			} else {
				c.unmapped(o.place(), "policy %s: must be random, round_robin or sequential", strings.Join(o.Args, " "))
			}
		case "max_fails":
			spec.maxFails = c.positive(o, "0 never marks an upstream down; shardns needs at least 1")
		case "doh_method":
			switch strings.Join(o.Args, " ") {
			case "POST":
			case "GET":
				c.note(o.place(), "doh_method GET: shardns asks DNS over HTTPS upstreams with POST, which they all answer alike")
			default:
				c.unmapped(o.place(), "doh_method %s: must be GET or POST", strings.Join(o.Args, " "))
			}
		case "max_concurrent":
			spec.maxConc = c.positive(o, "shardns needs a bound of at least 1")
		case "health_check":
			if dur, ok := c.duration(o, 0); ok && dur == 0 {
				c.unmapped(o.place(), "health_check 0: shardns always probes an upstream it marked down")
			} else if ok {
				hc := config.Duration(dur)
				spec.health = &hc
			}
			if len(o.Args) > 1 {
				c.unmapped(o.place(), "health_check %s: shardns probes with its own question", strings.Join(o.Args[1:], " "))
			}
		default:
			return false
		}
		return true
	})
	if !c.resolveNames(d, &spec.tls) {
		return
	}
	c.noteUnusedTLS(d, &spec.tls)
	c.applyForward(s, d, spec)
}

// proxyPlugin maps proxy, which CoreDNS 1.4 replaced by forward, as a
// forward with its policies renamed.
func (c *converter) proxyPlugin(s *server, d *Directive) {
	spec, ok := c.forwardTarget(s, d)
	if !ok {
		return
	}
	c.note(d.place(), "proxy (removed in CoreDNS 1.4) is converted as forward")
	c.options(d, func(o *Directive) bool {
		switch o.Name {
		case "policy":
			p := map[string]string{"random": "random", "round_robin": "round_robin", "first": "sequential"}[strings.Join(o.Args, " ")]
			if p == "" {
				c.unmapped(o.place(), "policy %s: shardns has random, round_robin and first (sequential)", strings.Join(o.Args, " "))
			}
			spec.policy = p
		case "max_fails":
			spec.maxFails = c.positive(o, "0 never marks an upstream down; shardns needs at least 1")
		case "protocol":
			if strings.Join(o.Args, " ") != "dns" {
				c.unmapped(o.place(), "protocol %s: shardns forwards plain DNS", strings.Join(o.Args, " "))
			}
		case "except":
			spec.opts.opts.Except = append(spec.opts.opts.Except, c.exceptZones(o)...)
		default:
			return false
		}
		return true
	})
	c.applyForward(s, d, spec)
}

// forwardTarget reads FROM TO...: the zones forwarded (FROM, or the
// block's zones when FROM is the root) and the upstreams.
func (c *converter) forwardTarget(s *server, d *Directive) (*forwardSpec, bool) {
	if len(d.Args) < 2 {
		c.unmapped(d.place(), "%s needs a zone and at least one upstream", d.Name)
		return nil, false
	}
	from, err := NormalizeZone(d.Args[0])
	if err != nil {
		c.unmapped(d.place(), "%s %s: %v", d.Name, d.Args[0], err)
		return nil, false
	}
	spec := &forwardSpec{zones: []string{from}}
	if from == "." {
		spec.zones = s.blockZones
	}
	if slices.Contains(spec.zones, ".") {
		spec.zones = []string{"."}
	}
	for _, to := range d.Args[1:] {
		if !c.forwardUpstream(d, spec, to) {
			return nil, false
		}
	}
	return spec, true
}

// forwardUpstream adds the upstream to of d to spec: false, and the
// reason reported, when it has no shardns equivalent.
func (c *converter) forwardUpstream(d *Directive, spec *forwardSpec, to string) bool {
	if u, name, ok := tlsUpstream(to); ok && d.Name == "forward" {
		spec.upstreams = append(spec.upstreams, u)
		spec.tls.tlsTargets++
		if name != "" {
			spec.tls.namedAt = append(spec.tls.namedAt, name)
		}
		return true
	}
	if strings.HasPrefix(to, "https://") && d.Name == "forward" {
		return c.dohUpstream(d, spec, to)
	}
	u, ok := upstream(to)
	if !ok {
		c.unmapped(d.place(), "%s upstream %s: shardns forwards plain DNS to an IP, IP:port or a resolv.conf path, "+
			"DNS over TLS to tls://IP[:port] and DNS over HTTPS to https://IP[:port] (forward only)", d.Name, to)
		return false
	}
	spec.upstreams = append(spec.upstreams, u)
	return true
}

// dohUpstream adds the DNS over HTTPS upstream to, asked at /dns-query
// as CoreDNS asks it. CoreDNS refuses a path; it looks a host name up
// at start, which shardns does not (it could ask itself).
func (c *converter) dohUpstream(d *Directive, spec *forwardSpec, to string) bool {
	u, name, ok := httpsUpstream(to)
	switch {
	case !ok && strings.Contains(strings.TrimPrefix(to, "https://"), "/"):
		c.unmapped(d.place(), "forward upstream %s: CoreDNS refuses a path on https:// upstreams (it asks /dns-query)", to)
		return false
	case !ok:
		c.unmapped(d.place(), "forward upstream %s: shardns asks DNS over HTTPS at https://IP[:port] and looks no upstream name up "+
			"(write the IP, and the name in tls_servername)", to)
		return false
	case name != "":
		c.note(d.place(), "forward upstream %s: CoreDNS ignores a server name on an https:// upstream, and so does shardns "+
			"(tls_servername sets it)", to)
	}
	spec.upstreams = append(spec.upstreams, u)
	spec.tls.tlsTargets++
	return true
}

// upstream converts one upstream of forward or proxy.
func upstream(to string) (string, bool) {
	u := strings.TrimPrefix(to, "dns://")
	if strings.Contains(u, "://") {
		return "", false
	}
	if ap, err := netip.ParseAddrPort(u); err == nil {
		return ap.String(), true
	}
	if a, err := netip.ParseAddr(u); err == nil {
		return a.String(), true
	}
	// CoreDNS reads anything else as a resolv.conf; an absolute path is
	// the only such word shardns reads as one too.
	return u, strings.HasPrefix(u, "/")
}

// applyForward sets forward.* for the root zone or adds a stub domain.
func (c *converter) applyForward(s *server, d *Directive, spec *forwardSpec) {
	f := &c.cfg.Forward
	if spec.zones[0] == "." {
		if !c.claim("forward .", d, "forwarder for names outside every zone") {
			return
		}
		f.Upstreams = spec.upstreams
		if spec.policy != "" {
			f.Policy = spec.policy
		}
		if spec.maxFails != nil {
			f.MaxFails = *spec.maxFails
		}
		if spec.health != nil {
			f.HealthCheck = *spec.health
		}
		f.TLS = spec.tls.tls
		if spec.tls.maxIdle != nil {
			f.MaxIdleConns = *spec.tls.maxIdle
		}
		if spec.tls.expire != nil {
			f.Expire = *spec.tls.expire
		}
		c.checkMaxAge(d, &spec.opts, f.Expire)
		if spec.opts.maxAge != nil {
			f.MaxAge = *spec.opts.maxAge
		}
		f.ForwardOptions = spec.opts.opts
		c.nextRcodes(s, d, spec)
		c.tlsFileUse(&spec.tls)
		if spec.maxConc != nil {
			f.MaxConcurrent = *spec.maxConc
		} else {
			c.note(d.place(), "%s without max_concurrent: forward.maxConcurrent stays %d (CoreDNS has no bound)", d.Name, f.MaxConcurrent)
		}
		return
	}
	if !c.claim(d.Name+" "+strings.Join(spec.zones, " "), d, "forwarder per zone") {
		return
	}
	for _, z := range spec.zones {
		if !config.ValidDomain(z) {
			c.unmapped(d.place(), "%s zone %s: not a host-style domain name", d.Name, z)
			return
		}
	}
	for _, st := range f.Stubs {
		for _, z := range spec.zones {
			if slices.Contains(st.Zones, z) {
				c.unmapped(d.place(), "%s %s: a stub domain for %s is already converted", d.Name, z, z)
				return
			}
		}
	}
	// Stub domains share forward.* but their policy: an option that
	// differs from the root forwarder's has no key.
	same := func(name string, set bool, equal bool) {
		if set && !equal {
			c.unmapped(d.place(), "%s for stub domain %s: one %s for every upstream (forward.*)", name, strings.Join(spec.zones, " "), name)
		}
	}
	same("max_fails", spec.maxFails != nil, spec.maxFails != nil && *spec.maxFails == f.MaxFails)
	same("max_concurrent", spec.maxConc != nil, spec.maxConc != nil && *spec.maxConc == f.MaxConcurrent)
	same("health_check", spec.health != nil, spec.health != nil && *spec.health == f.HealthCheck)
	same("max_idle_conns", spec.tls.maxIdle != nil, spec.tls.maxIdle != nil && *spec.tls.maxIdle == f.MaxIdleConns)
	same("expire", spec.tls.expire != nil, spec.tls.expire != nil && *spec.tls.expire == f.Expire)
	same("max_age", spec.opts.maxAge != nil, spec.opts.maxAge != nil && *spec.opts.maxAge == f.MaxAge)
	c.checkExcept(s, d, spec)
	f.Stubs = append(f.Stubs, config.StubConfig{Zones: spec.zones, Upstreams: spec.upstreams, Policy: spec.policy, TLS: spec.tls.tls,
		ForwardOptions: spec.opts.opts, Next: c.nextRcodes(s, d, spec)})
	c.tlsFileUse(&spec.tls)
	c.stubPlaces = append(c.stubPlaces, d.place())
	c.stubBlocks = append(c.stubBlocks, s.block)
}

// dropShadowedStubs removes stub domains inside a kubernetes zone that no
// fallthrough zone overlaps. CoreDNS runs kubernetes before forward, so
// such a forwarder is never asked there either; shardns refuses to
// configure one.
func (c *converter) dropShadowedStubs() {
	k := c.cfg.Kubernetes
	if !k.Enabled {
		return
	}
	own := k.AllZones()
	var kept []config.StubConfig
	var places []place
	var blocks []*ServerBlock
	for i, st := range c.cfg.Forward.Stubs {
		shadowed := ""
		for _, z := range st.Zones {
			if !underAny(z, own) {
				continue
			}
			reached := false
			for _, f := range k.Fallthrough {
				reached = reached || underAny(z, []string{f}) || underAny(f, []string{z})
			}
			if !reached {
				shadowed = z
			}
		}
		switch {
		case shadowed != "" && c.stubBlocks[i] == c.kubeBlock:
			c.note(c.stubPlaces[i], "forward for %s is left out: the kubernetes plugin answers every name there (it comes before forward in CoreDNS too) and no fallthrough reaches it", shadowed)
		case shadowed != "":
			c.unmapped(c.stubPlaces[i], "forward for %s: CoreDNS sends these names to this server block, but shardns answers every name of a kubernetes zone from the cluster (add the zone to kubernetes fallthrough to forward its NXDOMAINs)", shadowed)
		default:
			kept = append(kept, st)
			places = append(places, c.stubPlaces[i])
			blocks = append(blocks, c.stubBlocks[i])
		}
	}
	c.cfg.Forward.Stubs, c.stubPlaces, c.stubBlocks = kept, places, blocks
}

// positive reads o's one argument as a number of at least 1.
func (c *converter) positive(o *Directive, zero string) *int {
	n, err := strconv.Atoi(strings.Join(o.Args, " "))
	switch {
	case err != nil || n < 0:
		c.unmapped(o.place(), "%s %s: not a number", o.Name, strings.Join(o.Args, " "))
		return nil
	case n == 0:
		c.unmapped(o.place(), "%s 0: %s", o.Name, zero)
		return nil
	}
	return &n
}
