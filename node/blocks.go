package node

import (
	"fmt"
	"log/slog"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/metrics"
	"github.com/shardns/shardns/query"
	"github.com/shardns/shardns/zone"
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
		var err error
		c.blocks[i], err = c.newPlane(fmt.Sprintf("servers[%d].chain", i), c.cfg.ForChain(ch), c.log.With("server", i),
			c.answer.Restrict(ch.AnswersCluster(), ch.AnswersFiles()), listen, m)
		if err != nil {
			return err
		}
	}
	return nil
}

// newPlane builds the resolver plane of cfg (a view's or a block's): its
// rewrite rules, templates, hosts, access lists and chaos, and
// forwarders and caches of its own, answering from answer. An error
// names key.
func (c *core) newPlane(key string, cfg *config.Config, log *slog.Logger, answer *zone.Config,
	listen []string, m *metrics.Forward) (*core, error) {
	p := &core{cfg: cfg, log: log, answer: answer, nodeName: c.nodeName}
	if err := p.buildResolvers(); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	var err error
	if p.upstream, err = p.newUpstream(listen, m); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return p, nil
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
