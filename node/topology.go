package node

import (
	"context"

	"github.com/shardns/shardns/query"
)

// buildTopology gives the answer configuration the zone of the node this
// process runs on, when kubernetes.topology orders answers by it: as
// configured (kubernetes.nodeZone), or read from its Node's
// topology.kubernetes.io/zone label and read again now and then, so a
// relabelled node orders by its new zone. Until the zone is known the
// answers are the usual ones. A replica orders its own answers by it; a
// node-local process sends it with every question it asks the replicas.
func (c *core) buildTopology() error {
	k := c.cfg.Kubernetes
	if c.answer.Topology == 0 {
		return nil
	}
	if k.NodeZone != "" {
		c.answer.SetNodeZone(k.NodeZone)
		return nil
	}
	nodeName, client, err := c.ownNode(k.NodeName, "kubernetes.topology", "kubernetes.nodeName", ", or kubernetes.nodeZone")
	if err != nil {
		return err
	}
	read := func(ctx context.Context, node string) (string, string, error) {
		z, err := client.NodeZone(ctx, node)
		return z, "", err
	}
	c.topology = &localityWatch{read: read, node: nodeName, exact: true,
		set: func(l query.Locality) {
			c.answer.SetNodeZone(l.Zone)
			c.log.Info("headless answers are ordered for this node's zone", "node", nodeName, "zone", l.Zone)
		},
		failing: "headless answers keep their usual order until the node's zone is read",
		log:     c.log.With("component", "topology"), refresh: localityRefresh, retry: localityRetry}
	return nil
}
