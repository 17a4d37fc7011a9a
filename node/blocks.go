package node

import (
	"fmt"

	"github.com/shardns/shardns/metrics"
	"github.com/shardns/shardns/query"
)

// A servers[] entry with a chain (servers[].chain) is a server block with
// a plugin chain of its own, as in CoreDNS: its own forwarders and cache,
// hosts, rewrite rules, templates, access lists, logs, chaos and
// modifiers, and only the cluster's names and zone files its chain
// keeps. The zones, sources and ring stay the core's: blocks answer from
// the same records.

// buildBlocks builds the plane of every servers[] entry with a chain.
// Each gets forwarders and a cache of its own: one block's answers must
// not come from another's cache. An error names the entry's key.
func (c *core) buildBlocks(listen []string, m *metrics.Forward) error {
	c.blocks = make([]*core, len(c.cfg.Servers))
	for i := range c.cfg.Servers {
		ch := c.cfg.Servers[i].Chain
		if ch == nil {
			continue
		}
		key := fmt.Sprintf("servers[%d].chain", i)
		bp := &core{cfg: c.cfg.ForChain(ch), log: c.log.With("server", i), nodeName: c.nodeName,
			answer: c.answer.Restrict(ch.AnswersCluster(), ch.AnswersFiles())}
		if err := bp.buildResolvers(); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		var err error
		if bp.upstream, err = bp.newUpstream(listen, m); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		c.blocks[i] = bp
	}
	return nil
}

// blockHandler is the handler of servers[i]'s chain; the core's own
// handler when it has none.
func (c *core) blockHandler(i int, server string, m *metrics.All) *query.Handler {
	if i < 0 || i >= len(c.blocks) || c.blocks[i] == nil {
		return c.handler(server, m)
	}
	return c.planeHandler(c.blocks[i], server, m)
}

// planes lists the planes of the core's views and blocks.
func (c *core) planes() []*core {
	var out []*core
	for _, v := range c.views {
		out = append(out, v.plane)
	}
	for _, b := range c.blocks {
		if b != nil {
			out = append(out, b)
		}
	}
	return out
}
