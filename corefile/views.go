package corefile

import (
	"fmt"
	"slices"
	"strings"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/expression"
)

// CoreDNS tries the server blocks of one zone and port top to bottom and
// takes the first whose view expressions all hold, or that has none. A
// block with a view followed by an unfiltered block of the same zones
// and port becomes a view (views[]) of that block's plane; the
// unfiltered block is the default, and must be the main server block,
// whose plane is the process's.

// viewBlock is a server block with a view, and the unfiltered block that
// answers what its expressions do not hold for.
type viewBlock struct {
	block, fallback *ServerBlock
	view            *Directive
}

// viewPlugins are the plugins a view has its own of; every other plugin
// of a view block sets what shardns has once per process.
var viewPlugins = map[string]bool{"view": true, "hosts": true, "rewrite": true, "template": true,
	"acl": true, "forward": true}

// splitViews takes out of cf's blocks those with a view that a later
// unfiltered block of the same addresses backs, in order. A view block
// without one stays, and its view is reported by the view plugin.
func (c *converter) splitViews(cf *Corefile) []*ServerBlock {
	var rest []*ServerBlock
	for i, b := range cf.Blocks {
		v := viewOf(b)
		if v == nil {
			rest = append(rest, b)
			continue
		}
		addrs := blockAddrs(b)
		var fallback *ServerBlock
		for _, later := range cf.Blocks[i+1:] {
			if viewOf(later) == nil && addrs != "" && blockAddrs(later) == addrs {
				fallback = later
				break
			}
		}
		if fallback == nil {
			rest = append(rest, b)
			continue
		}
		c.viewBlocks = append(c.viewBlocks, viewBlock{block: b, fallback: fallback, view: v})
	}
	return rest
}

func viewOf(b *ServerBlock) *Directive {
	for _, d := range b.Directives {
		if d.Name == "view" {
			return d
		}
	}
	return nil
}

// blockAddrs is the sorted scheme, zone and port of every key of b, to
// compare blocks; "" when a key does not parse.
func blockAddrs(b *ServerBlock) string {
	var out []string
	for _, k := range b.Keys {
		addrs, err := ParseKey(k)
		if err != nil {
			return ""
		}
		for _, a := range addrs {
			out = append(out, a.Scheme+"://"+a.Zone+":"+a.Port)
		}
	}
	slices.Sort(out)
	return strings.Join(slices.Compact(out), " ")
}

// viewPlugin reports a view that no later unfiltered block of the same
// zones and port backs: what its expressions do not hold for, CoreDNS
// answers elsewhere or refuses, which shardns has no way to say.
func (c *converter) viewPlugin(_ *server, d *Directive) {
	c.unmapped(d.place(), "view: no later server block of the same zones and port without a view; shardns answers what no view holds for from one plane, so this block is read as an unfiltered one")
}

// convertViews maps each view block to a views[] entry, once every
// unfiltered block is read.
func (c *converter) convertViews() {
	for _, vb := range c.viewBlocks {
		if c.main == nil || c.main.block != vb.fallback {
			c.unmapped(vb.view.place(), "view: shardns has views of the main server block's plane only (%s), not of %q; this block is not converted",
				c.mainName(), strings.Join(vb.fallback.Keys, " "))
			continue
		}
		if v, ok := c.convertView(vb); ok {
			c.cfg.Views = append(c.cfg.Views, v)
		}
	}
}

func (c *converter) mainName() string {
	if c.main == nil {
		return "none"
	}
	return c.main.name()
}

// convertView reads the view directive and maps the block's plugins with
// the same plugin converters, on a converter of the block's own.
func (c *converter) convertView(vb viewBlock) (config.ViewConfig, bool) {
	d := vb.view
	v := config.ViewConfig{Hosts: config.Default().Hosts}
	if len(d.Args) != 1 {
		c.unmapped(d.place(), "view needs one name; this block is not converted")
		return v, false
	}
	v.Name = d.Args[0]
	for _, o := range d.Block {
		if o.Name != "expr" {
			c.unmapped(o.place(), "view option %q has no shardns equivalent (CoreDNS knows expr only)", o.Name)
			continue
		}
		e := strings.Join(o.Args, " ")
		if _, err := expression.Compile(e); err != nil {
			c.fail(o.place(), "view %s: %v", v.Name, err)
			return v, false
		}
		v.Expr = append(v.Expr, e)
	}
	if len(v.Expr) == 0 {
		c.unmapped(d.place(), "view %s has no expr; this block is not converted", v.Name)
		return v, false
	}
	sub := c.blockConverter()
	s := *c.main
	s.block, s.root = vb.block, ""
	for _, r := range vb.block.Directives {
		if r.Name == "root" && len(r.Args) == 1 {
			s.root = r.Args[0]
		}
	}
	sub.main = &s
	for _, p := range sortedDirectives(vb.block.Directives) {
		if viewPlugins[p.Name] && p.Name != "view" {
			sub.directive(&s, p)
		}
	}
	for _, f := range sub.findings {
		c.add(f)
	}
	for k, at := range sub.tlsPlaces {
		c.tlsPlaces[k] = at
	}
	if _, ok := sub.claimed["forward ."]; ok {
		v.Forward = config.ViewForwardConfig{Upstreams: sub.cfg.Forward.Upstreams, Policy: sub.cfg.Forward.Policy,
			TLS: sub.cfg.Forward.TLS}
	}
	v.Forward.Stubs = sub.cfg.Forward.Stubs
	v.Hosts, v.Rewrite, v.Template, v.ACL = sub.cfg.Hosts, sub.cfg.Rewrite, sub.cfg.Template, sub.cfg.ACL
	c.compareOnce(vb)
	return v, true
}

// blockConverter is a converter for the plugins of one view block: its
// own configuration and claims, the findings' order of c.
func (c *converter) blockConverter() *converter {
	return &converter{cfg: config.Default(), seen: map[Finding]bool{}, claimed: map[string]*Directive{},
		done: map[*Directive]bool{}, saw: map[string]bool{}, blockFiles: map[*ServerBlock][]int{},
		rank: c.rank, tlsPlaces: map[config.UpstreamTLSConfig]place{}}
}

// compareOnce reports the plugins of a view block that set what shardns
// has once per process (kubernetes, cache, errors, ...) where they differ
// from the unfiltered block's: the view answers as that block does.
func (c *converter) compareOnce(vb viewBlock) {
	fallback := map[string]*Directive{}
	for _, d := range vb.fallback.Directives {
		fallback[d.Name] = d
	}
	seen := map[string]bool{}
	for _, d := range vb.block.Directives {
		if viewPlugins[d.Name] || perServer[d.Name] {
			continue
		}
		seen[d.Name] = true
		if f := fallback[d.Name]; f == nil || canonical(f) != canonical(d) {
			c.unmapped(d.place(), "%s in the block of view %s differs from the unfiltered block (line %d): shardns has one %s per process, and the view's queries get the unfiltered block's",
				d.Name, vb.view.Args[0], vb.fallback.Line, d.Name)
		}
	}
	for _, d := range vb.fallback.Directives {
		if !viewPlugins[d.Name] && !perServer[d.Name] && !seen[d.Name] {
			c.unmapped(vb.view.place(), "view %s: its block has no %s, but the unfiltered block's (line %d) applies to the view's queries too in shardns",
				vb.view.Args[0], d.Name, d.Line)
		}
	}
}

// fail records an error that stops the conversion, as CoreDNS would not
// start; the first one is returned.
func (c *converter) fail(at place, format string, args ...any) {
	if c.err == nil {
		c.err = &Error{File: at.file, Line: at.line, Msg: fmt.Sprintf(format, args...)}
	}
}
