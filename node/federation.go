package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/shardns/shardns/query"
	"github.com/shardns/shardns/sources/kubeclient"
	"github.com/shardns/shardns/zone"
)

// How often the node's topology labels are read again: they change when
// a node is relabelled, which is rare; a failed read is retried sooner.
const (
	localityRefresh = 10 * time.Minute
	localityRetry   = 15 * time.Second
)

// ownNode returns the name of the Node this process runs on (configured,
// else $NODE_NAME, which deploy/ sets from spec.nodeName) and a client to
// read it with. feature and key name what needs it in the error; or says
// what else the user may set.
func (c *core) ownNode(configured, feature, key, or string) (string, *kubeclient.Client, error) {
	name := configured
	if name == "" {
		name = os.Getenv("NODE_NAME")
	}
	if name == "" {
		return "", nil, fmt.Errorf("%s: the name of this node is unknown: set %s or the NODE_NAME "+
			"environment variable (from spec.nodeName)%s", feature, key, or)
	}
	k := c.cfg.Kubernetes
	client, err := kubeClient(k)
	return name, client, err
}

// buildFederation sets up the federation answers of the configuration:
// the node's zone and region as configured, or read from its Node.
func (c *core) buildFederation() error {
	f := c.cfg.Federation
	if !f.Enabled() {
		return nil
	}
	c.federation = &query.Federation{Zones: c.cfg.FederationZones(), Domains: map[string]string{}, Upstream: f.Upstream}
	for name, domain := range f.Names {
		c.federation.Domains[name] = zone.Fqdn(domain)
	}
	if f.NodeZone != "" {
		c.federation.SetLocality(query.Locality{Zone: zone.LowerASCII(f.NodeZone), Region: zone.LowerASCII(f.NodeRegion)})
		return nil
	}
	nodeName, client, err := c.ownNode(f.NodeName, "federation", "federation.nodeName",
		", or federation.nodeZone and nodeRegion")
	if err != nil {
		return err
	}
	set := c.federation.SetLocality
	c.locality = &localityWatch{read: client.NodeLocality, node: nodeName,
		set: func(l query.Locality) {
			set(l)
			c.log.Info("federation names point to this node's zone and region", "node", nodeName, "zone", l.Zone, "region", l.Region)
		},
		failing: "federation CNAMEs get SERVFAIL until the node's zone and region are read",
		log:     c.log.With("component", "federation"), refresh: localityRefresh, retry: localityRetry}
	return nil
}

// localityWatch keeps a locality the one of its Node's labels: read at
// start, then every localityRefresh; set is told each new one. Until the
// first read succeeds, what depends on it waits (federation CNAMEs get
// SERVFAIL, headless answers keep their usual order).
type localityWatch struct {
	read func(ctx context.Context, node string) (zone, region string, err error)
	node string
	set  func(query.Locality)
	// exact keeps the labels' case: EndpointSlice zones compare exactly,
	// where federation names are lower case.
	exact bool
	// failing is logged, with the cause, while reads fail.
	failing string
	log     *slog.Logger
	// refresh and retry are the waits after a read that worked and one
	// that failed.
	refresh, retry time.Duration

	cancel context.CancelFunc
	done   sync.WaitGroup
}

func (w *localityWatch) start() {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.done.Go(func() { w.run(ctx) })
}

func (w *localityWatch) stop() {
	w.cancel()
	w.done.Wait()
}

func (w *localityWatch) run(ctx context.Context) {
	var last query.Locality
	var failing string
	lower := zone.LowerASCII
	if w.exact {
		lower = func(s string) string { return s }
	}
	for {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		z, r, err := w.read(rctx, w.node)
		cancel()
		wait := w.refresh
		switch {
		case err != nil:
			wait = w.retry
			if err.Error() != failing { // once per cause, not every retry
				w.log.Warn(w.failing, "node", w.node, "err", err)
				failing = err.Error()
			}
		default:
			failing = ""
			if l := (query.Locality{Zone: lower(z), Region: lower(r)}); l != last {
				last = l
				w.set(l)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
