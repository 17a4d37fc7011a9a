package corefile

import (
	"slices"
	"strings"

	"github.com/shardns/shardns/config"
)

// CoreDNS gives each server block a plugin chain of its own. A block
// whose chain plugins differ from the main block's becomes a servers[]
// entry with a chain (servers[].chain): its cache, forward, hosts,
// rewrite, template, acl, log, errors, chaos, loadbalance and modifiers
// are its own, and it answers the cluster's names and the zone files
// only when it has the kubernetes or file plugin. Blocks whose chain
// plugins are the main block's keep answering through the top level, as
// before chains existed, so single-chain Corefiles convert as they did.

// chainPlugins are the plugins a chain has its own of.
var chainPlugins = map[string]bool{"cache": true, "forward": true, "proxy": true, "hosts": true,
	"rewrite": true, "template": true, "acl": true, "log": true, "errors": true, "chaos": true,
	"loadbalance": true, "bufsize": true, "nsid": true, "header": true, "dns64": true}

// presencePlugins are the plugins of shared records: a chain only says
// whether it answers from them.
var presencePlugins = map[string]bool{"kubernetes": true, "file": true, "k8s_external": true, "k8s_gateway": true,
	"federation": true, "multicluster": true, "autopath": true}

// foldable are chain plugins that fold into the main block's chain with
// nothing lost that a client would see: a block's forwarder becomes a
// stub domain of its zones, and the main block's error log and
// loadbalance cover its names too (loadbalance changes only the order).
var foldable = map[string]bool{"forward": true, "proxy": true, "errors": true, "loadbalance": true}

// chainSignature is what of b's chain folding it into the main block's
// would lose, to compare blocks: its chain plugins as written, less
// forward and proxy (a block's forwarder folds into a stub domain of
// its zones), and whether it answers from the cluster's records where
// its zones hold cluster names (clusterZones).
func chainSignature(b *ServerBlock, zones, clusterZones []string) string {
	var out []string
	for _, d := range b.Directives {
		switch {
		case foldable[d.Name]:
		case chainPlugins[d.Name]:
			out = append(out, canonical(d))
		}
	}
	if overlapsAny(zones, clusterZones) && hasPlugin(b, "kubernetes") {
		out = append(out, "kubernetes")
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// overlapsAny reports whether a zone of a is at or under, or above, a
// zone of b.
func overlapsAny(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == "." || y == "." || underAny(x, []string{y}) || underAny(y, []string{x}) {
				return true
			}
		}
	}
	return false
}

// chainBlock reports whether s answers through a chain of its own: it
// is not of the main server's block, and its block's chain differs from
// the main's.
func (c *converter) chainBlock(s *server) bool {
	if c.main == nil || s.block == c.main.block || hasPlugin(s.block, "whoami") {
		return false
	}
	if c.zoneTaken(s) {
		return false // CoreDNS refuses a zone twice on a port; folded, as before chains
	}
	cluster := c.mainClusterZones()
	return chainSignature(s.block, s.zones, cluster) != chainSignature(c.main.block, s.zones, cluster)
}

// zoneTaken reports whether a zone of s is served on one of its
// addresses by another block already: the main server's, or an entry's.
func (c *converter) zoneTaken(s *server) bool {
	taken := func(listen, zones []string) bool {
		shared := slices.ContainsFunc(s.listen, func(a string) bool { return slices.Contains(listen, a) })
		return shared && slices.ContainsFunc(s.zones, func(z string) bool { return slices.Contains(zones, z) })
	}
	if c.main.block != s.block && taken(c.main.listen, c.main.zones) {
		return true
	}
	for i, sc := range c.cfg.Servers {
		zones := sc.Zones
		if len(zones) == 0 {
			zones = []string{"."}
		}
		if i != s.entry && c.entryBlocks[i] != s.block && taken(sc.Listen, zones) {
			return true
		}
	}
	return false
}

// mainClusterZones are the zones the main block's kubernetes plugin answers
// (its zones and reverse zones as written, else the block's), none when
// it has no kubernetes plugin.
func (c *converter) mainClusterZones() []string {
	for _, d := range c.main.block.Directives {
		if d.Name != "kubernetes" {
			continue
		}
		var out []string
		for _, a := range d.Args {
			if z, err := NormalizeZone(a); err == nil {
				out = append(out, z)
			}
		}
		if len(out) == 0 {
			out = c.main.blockZones
		}
		return out
	}
	return nil
}

// needsChain reports whether s has a servers[] entry whose chain is its
// block's to convert.
func (c *converter) needsChain(s *server) bool {
	return s.entry >= 0 && c.chainBlock(s)
}

// addChainListener gives plain-DNS server s a servers[] entry of its own,
// for its chain: beside dns.listen or another block's entry on the same
// addresses, it takes the names of its zones there, as CoreDNS routes a
// question to the block of the longest zone on its port. A block of
// several keys on one port is one entry.
func (c *converter) addChainListener(s *server) {
	for i := range c.cfg.Servers {
		if c.entryBlocks[i] == s.block && sameSet(c.cfg.Servers[i].Listen, s.listen) {
			s.entry = i
			c.cfg.Servers[i].Zones = appendNew(c.cfg.Servers[i].Zones, s.zones...)
			return
		}
	}
	sc := config.ServerConfig{Listen: s.listen, Zones: append([]string(nil), s.zones...)}
	c.cfg.Servers = append(c.cfg.Servers, sc)
	s.entry = len(c.cfg.Servers) - 1
	if c.entryBlocks == nil {
		c.entryBlocks = map[int]*ServerBlock{}
	}
	c.entryBlocks[s.entry] = s.block
}

// hasPlugin reports whether b has a plugin of that name.
func hasPlugin(b *ServerBlock, name string) bool {
	return slices.ContainsFunc(b.Directives, func(d *Directive) bool { return d.Name == name })
}

// convertChain maps the chain plugins of s's block, on a converter of
// their own, to the chain of s's servers[] entry.
func (c *converter) convertChain(s *server) {
	sub := c.blockConverter()
	own := *s
	sub.main = &own // nothing of this block is "another block's" to it
	for _, d := range sortedDirectives(s.block.Directives) {
		if chainPlugins[d.Name] {
			sub.directive(&own, d)
		}
	}
	for _, f := range sub.findings {
		c.add(f)
	}
	for k, at := range sub.tlsPlaces {
		c.tlsPlaces[k] = at
	}
	ch := sub.chain(s.block)
	if ch.AnswersCluster() {
		ch.Forward.Stubs = c.unshadowedStubs(s, ch.Forward.Stubs)
	}
	c.cfg.Servers[s.entry].Chain = ch
}

// unshadowedStubs drops the stubs of a chain with the kubernetes plugin
// that lie in a cluster zone no fallthrough reaches: the plugin answers
// every name there before forward, in CoreDNS too.
func (c *converter) unshadowedStubs(s *server, stubs []config.StubConfig) []config.StubConfig {
	k := c.cfg.Kubernetes
	var kept []config.StubConfig
	for _, st := range stubs {
		shadowed := ""
		for _, z := range st.Zones {
			if underAny(z, k.AllZones()) && !overlapsAny([]string{z}, k.Fallthrough) {
				shadowed = z
			}
		}
		if shadowed == "" {
			kept = append(kept, st)
			continue
		}
		c.note(s.block.place(), "forward for %s is left out: the kubernetes plugin answers every name there (it comes before forward in CoreDNS too) and no fallthrough reaches it", shadowed)
	}
	return kept
}

// chain is what the converter read, as the chain of block b: each plugin
// the block leaves out is absent from the chain, as in CoreDNS.
func (c *converter) chain(b *ServerBlock) *config.ChainConfig {
	cfg := c.cfg
	kube, files := hasPlugin(b, "kubernetes"), hasPlugin(b, "file") || hasPlugin(b, "k8s_gateway") // its zones are served as files are
	ch := &config.ChainConfig{Kubernetes: &kube, Files: &files}
	fw := cfg.Forward
	if _, ok := c.claimed["forward ."]; !ok {
		fw.Upstreams = []string{}
	}
	ch.Forward = &fw
	ca := cfg.Cache
	ca.Enabled = c.saw["cache"]
	ch.Cache = &ca
	capHostsTTL(cfg, ca.Enabled)
	ch.Hosts = &cfg.Hosts
	ch.Rewrite = append([]config.RewriteRule{}, cfg.Rewrite...)
	ch.Template = append([]config.Template{}, cfg.Template...)
	ch.ACL = append([]config.ACLConfig{}, cfg.ACL...)
	lg := cfg.Log
	lg.Errors = c.errorsLogged
	lg.Queries = lg.Queries && c.saw["log"]
	ch.Log = &lg
	ch.Chaos = &cfg.Chaos
	lb := cfg.LoadBalance
	lb.Enabled = c.saw["loadbalance"]
	ch.LoadBalance = &lb
	ch.BufSize, ch.NSID, ch.Header, ch.DNS64 = &cfg.BufSize, &cfg.NSID, &cfg.Header, &cfg.DNS64
	return ch
}

// capHostsTTL gives the hosts entries the TTL CoreDNS's cache gives
// their answers: cache comes before hosts in CoreDNS's plugin order and
// caps the TTL of every answer it passes (k3s's NodeHosts, ttl 60 under
// cache 30, are answered with 30). It reports whether it changed it.
func capHostsTTL(cfg *config.Config, cacheOn bool) bool {
	h, ca := &cfg.Hosts, cfg.Cache
	// A cache of some zones only may not pass the hosts names: left as
	// written.
	if !cacheOn || len(ca.Zones) > 0 || (len(h.Entries) == 0 && len(h.Files) == 0) {
		return false
	}
	ttl := min(max(h.TTL, ca.MinTTL), ca.MaxTTL)
	if ttl == h.TTL {
		return false
	}
	h.TTL = ttl
	return true
}
