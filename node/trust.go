package node

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"google.golang.org/grpc"

	"github.com/shardns/shardns/cluster/membership"
	"github.com/shardns/shardns/cluster/trust"
	kubesource "github.com/shardns/shardns/sources/kubernetes"
)

// How long start-up waits for what admission needs from the API: the
// gossip key (the node-local DaemonSet waits for a replica to make it)
// and the first list of the peers Service.
const (
	gossipKeyWait = 2 * time.Minute
	peerListWait  = 30 * time.Second
)

// startTrust gathers what decides who may join before any port opens:
// the gossip keys and, with cluster.joinService, the addresses of the
// peers Service's endpoints.
func (n *Node) startTrust(c *clusterState) error {
	cc := c.cfg
	var err error
	if cc.JoinService != "" || cc.Secret != "" {
		k := n.cfg.Kubernetes
		if c.client, err = kubesource.NewClientContext(k.Kubeconfig, k.Context, "shardns/"+Version); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
	}
	switch {
	case cc.SecretKeyFile != "":
		if c.keys, err = membership.ReadSecretKeys(cc.SecretKeyFile); err != nil {
			return fmt.Errorf("cluster.secretKeyFile: %w", err)
		}
	case cc.Secret != "":
		ctx, cancel := context.WithTimeout(context.Background(), gossipKeyWait)
		data, err := kubesource.GossipKey(ctx, c.client, cc.Secret, n.log)
		cancel()
		if err != nil {
			return err
		}
		if c.keys, err = membership.ParseSecretKeys(data, "in Secret "+cc.Secret); err != nil {
			return fmt.Errorf("cluster.secret: %w", err)
		}
	}
	if cc.Insecure {
		n.log.Warn("cluster.insecure is set: gossip and the remote port are not authenticated; " +
			"any process that reaches them can join the ring and answer for zones")
	}
	if cc.JoinService == "" {
		return nil
	}
	c.peers = &trust.AddrSet{}
	c.peersChanged = make(chan struct{}, 1)
	services := append([]string{cc.JoinService}, cc.AdmitServices...)
	c.peerWatch = kubesource.WatchPeers(c.client, services, n.log, func(addrs []netip.Addr) {
		c.peers.Set(addrs)
		// A replica refused while its address was not listed yet is joined
		// now rather than at the next rejoin round.
		select {
		case c.peersChanged <- struct{}{}:
		default:
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), peerListWait)
	defer cancel()
	if !c.peerWatch.WaitSynced(ctx) {
		c.stopTrust()
		return fmt.Errorf("cluster.joinService: the EndpointSlices of %v could not be listed within %v", services, peerListWait)
	}
	return nil
}

// stopTrust ends the peers watch.
func (c *clusterState) stopTrust() {
	if c.peerWatch != nil {
		c.peerWatch.Stop()
	}
}

// admit is membership's admission: with cluster.joinService a member's
// address must be an endpoint of the peers Service (or of
// cluster.admitServices), and its actor remote address must be on its
// gossip host, so an admitted member cannot send queries to a stranger.
// memberlist asks it under its node lock: it only reads memory.
func (c *clusterState) admit(m membership.Member) string {
	gossip, err := netip.ParseAddrPort(m.Addr)
	if err != nil {
		return trust.ReasonNotPeer
	}
	if c.peers != nil && !c.peers.Has(gossip.Addr()) {
		return trust.ReasonNotPeer
	}
	_, remoteAddr := parseMeta(m.Meta)
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return trust.ReasonRemoteAddress
	}
	if ip, err := netip.ParseAddr(host); err != nil || ip.Unmap() != gossip.Addr().Unmap() {
		return trust.ReasonRemoteAddress
	}
	return ""
}

// remoteAdmitted is the remote port's admission: the hosts of the live
// members and, with cluster.joinService, of the peers Service's endpoints
// (a replica that just joined may ask before gossip told every owner).
func (c *clusterState) remoteAdmitted(a netip.Addr) bool {
	return c.memberIPs.Has(a) || c.peers.Has(a)
}

// remoteDialOptions dial other replicas through the guard's credentials,
// from the remote bind address when one is set: the address the others
// admit is this replica's, not whichever one routing would pick.
func remoteDialOptions(g *trust.Guard, bindHost string) []grpc.DialOption {
	opts := g.DialOptions()
	ip := net.ParseIP(bindHost)
	if ip == nil || ip.IsUnspecified() {
		return opts
	}
	return append(opts, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
		return d.DialContext(ctx, "tcp", addr)
	}))
}

// bindUnspecified reports whether host:port listens on every address.
func bindUnspecified(hostPort string) bool {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	return host == "" || (err == nil && a.IsUnspecified())
}
