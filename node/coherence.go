package node

import (
	"time"

	"github.com/shardns/shardns/actors/dispatch"
	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/cluster/wire"
	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/query"
)

// startCoherence has this process tell the processes that asked about
// its zones which names changed, and take what owners tell it into
// n.fresh, which every owners' cache of the process checks (caches are
// told, not timed: actors/dispatch coherence.go, query coherence.go).
func (n *Node) startCoherence(c *clusterState) error {
	m := n.metrics.Cluster
	tier := "replica"
	if n.nodeLocal {
		tier = "nodelocal"
	}
	co, err := c.dispatch.StartCoherence(dispatch.CoherenceConfig{
		Life: longestTTL(n.cfg),
		Apply: func(changes []*wire.ZoneChange) {
			n.applyChanges(changes, tier)
		},
		Lost: n.fresh.ForgetAll,
		Now:  time.Now,
		Sent: m.InvalidationsSent, Received: m.InvalidationsReceived, Gaps: m.InvalidationsLost,
		Interest: m.InterestEntries, InterestDropped: m.InterestDropped,
		MailboxDropped: m.MailboxDropped.WithLabelValues(dispatch.InvalidateName),
	})
	if err != nil {
		return err
	}
	c.coherence = co
	return nil
}

// applyChanges records what an owner said changed, and how long after
// the change in the API this process learnt it.
func (n *Node) applyChanges(changes []*wire.ZoneChange, tier string) {
	cs := make([]query.Change, len(changes))
	for i, ch := range changes {
		cs[i] = query.Change{Zone: ch.Zone, Labels: ch.Labels, All: ch.All}
	}
	at := n.fresh.Forget(cs)
	m := n.metrics.Cluster
	m.InvalidationsApplied.Add(float64(len(changes)))
	for _, ch := range changes {
		if ch.TriggerUnixNano != 0 {
			m.DNSProgramming.WithLabelValues(tier).Observe(max(at.Sub(time.Unix(0, ch.TriggerUnixNano)), 0).Seconds())
		}
	}
}

// published tells the askers of a zone this replica published what
// changed in it (zonemanager.Observer.Published), and observes how long after
// the change in the API it was published.
func (n *Node) published(p zonemanager.Published) {
	if !p.Trigger.IsZero() {
		n.metrics.Cluster.DNSProgramming.WithLabelValues("owner").Observe(max(time.Since(p.Trigger), 0).Seconds())
	}
	if c := n.cluster; c != nil && c.coherence != nil {
		c.coherence.Published(p)
	}
}

// ringMoved makes every owners' cache of the process forget what it
// holds when the ring changes from prev to next so that zones may have
// other owners: a new owner does not know who asked the old one, and
// an owner that restarted forgot who asked it.
func (n *Node) ringMoved(prev, next *cluster.Ring) {
	if prev != nil && !next.Same(prev) {
		n.fresh.ForgetAll()
	}
}

// longestTTL is the longest TTL this replica's answers carry: an asker's
// interest lasts that long at least (dispatch.MinInterestLife).
func longestTTL(cfg *config.Config) time.Duration {
	ttl := cfg.Istio.TTL
	if k := cfg.Kubernetes; k.TTL != nil {
		ttl = max(ttl, *k.TTL)
	}
	if e := cfg.Kubernetes.External; e != nil {
		ttl = max(ttl, e.TTLSeconds())
	}
	return time.Duration(ttl) * time.Second
}
