package node

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"time"

	"google.golang.org/grpc"

	"github.com/shardns/shardns/cluster/membership"
	"github.com/shardns/shardns/cluster/trust"
	"github.com/shardns/shardns/sources/kubeclient"
)

// How long start-up waits for what admission needs from the API: the
// gossip key (the node-local DaemonSet waits for a replica to make it)
// and the first list of the peers Service.
const (
	gossipKeyWait = 2 * time.Minute
	peerListWait  = 30 * time.Second
)

// startTrust gathers what decides who may join before any port opens:
// the replica keys (or a node-local process's credential) and, with
// cluster.joinService, the addresses of the peers Service's endpoints.
func (n *Node) startTrust(c *clusterState) error {
	cc := c.cfg
	var err error
	if cc.JoinService != "" || cc.Secret != "" || cc.NodeLocalSecret != "" {
		k := n.cfg.Kubernetes
		if c.client, err = kubeClient(k); err != nil {
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
		data, err := kubeclient.GossipKey(ctx, c.client, cc.Secret, n.log)
		cancel()
		if err != nil {
			return err
		}
		if c.keys, err = membership.ParseSecretKeys(data, "in Secret "+cc.Secret); err != nil {
			return fmt.Errorf("cluster.secret: %w", err)
		}
	}
	if err := n.startCredential(c); err != nil {
		return err
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
	c.peerWatch = kubeclient.WatchPeers(c.client, services, n.log, func(p kubeclient.Peers) {
		c.replicaPeers.Store(&p.Replicas)
		c.peers.Set(p.All)
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

// startCredential gives a node-local process its credential (from
// cluster.credentialFile or cluster.nodeLocalSecret), and has a replica
// with cluster.nodeLocalSecret keep the one derived from its keys there.
func (n *Node) startCredential(c *clusterState) error {
	cc := c.cfg
	switch {
	case n.nodeLocal && cc.CredentialFile != "":
		b, err := os.ReadFile(cc.CredentialFile)
		if err != nil {
			return fmt.Errorf("cluster.credentialFile: %w", err)
		}
		cred, err := trust.ParseCredential(b)
		if err != nil {
			return fmt.Errorf("cluster.credentialFile %s: %w", cc.CredentialFile, err)
		}
		c.credential = &cred
	case n.nodeLocal && cc.NodeLocalSecret != "":
		ctx, cancel := context.WithTimeout(context.Background(), gossipKeyWait)
		b, err := kubeclient.ReadCredential(ctx, c.client, cc.NodeLocalSecret, n.log)
		cancel()
		if err != nil {
			return err
		}
		cred, err := trust.ParseCredential(b)
		if err != nil {
			return fmt.Errorf("cluster.nodeLocalSecret %s: %w", cc.NodeLocalSecret, err)
		}
		c.credential = &cred
	case !n.nodeLocal && cc.NodeLocalSecret != "" && len(c.keys) > 0:
		cred, err := trust.NodeLocalCredential(c.keys)
		if err != nil {
			return fmt.Errorf("cluster.nodeLocalSecret: %w", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		c.stopPublish = cancel
		c.publishing.Go(func() {
			// Off the start path: node-local processes wait for it, the
			// replica's own serving does not.
			_ = kubeclient.PublishCredential(ctx, c.client, cc.NodeLocalSecret, cred.Marshal(), func(b []byte) bool {
				held, err := trust.ParseCredential(b)
				return err == nil && held.Same(cred)
			}, n.log)
		})
	}
	return nil
}

// stopTrust ends the peers watch and the credential's publication.
func (c *clusterState) stopTrust() {
	if c.peerWatch != nil {
		c.peerWatch.Stop()
	}
	if c.stopPublish != nil {
		c.stopPublish()
		c.publishing.Wait()
	}
}

// admit is membership's admission: with cluster.joinService a member's
// address must be an endpoint of the peers Service (or of
// cluster.admitServices); one that says it owns zones, or will, must be
// an endpoint of the peers Service itself, under its own pod's name, so
// that no other member can own zones or pass for a replica; and its
// actor remote address must be on its gossip host, so an admitted member
// cannot send queries to a stranger. memberlist asks it under its node
// lock: it only reads memory.
func (c *clusterState) admit(m membership.Member) string {
	gossip, err := netip.ParseAddrPort(m.Addr)
	if err != nil {
		return trust.ReasonNotPeer
	}
	if c.peers != nil && !c.peers.Has(gossip.Addr()) {
		return trust.ReasonNotPeer
	}
	role, remoteAddr := parseMeta(m.Meta)
	if c.peers != nil {
		names, replica := c.replicaNames(gossip.Addr())
		switch {
		case replica && len(names) > 0 && !slices.Contains(names, m.Name):
			// Another name at a replica's address: a phantom member.
			return trust.ReasonNotPeer
		case !replica && role != roleNone:
			return trust.ReasonNotOwner
		}
	}
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return trust.ReasonRemoteAddress
	}
	if ip, err := netip.ParseAddr(host); err != nil || ip.Unmap() != gossip.Addr().Unmap() {
		return trust.ReasonRemoteAddress
	}
	return ""
}

// replicaNames reports whether addr is an endpoint of the peers Service,
// and the names its pod may go by (none: any).
func (c *clusterState) replicaNames(addr netip.Addr) ([]string, bool) {
	p := c.replicaPeers.Load()
	if p == nil {
		return nil, false
	}
	names, ok := (*p)[addr.Unmap()]
	return names, ok
}

// mayOwn reports whether the member at gossip address addr may own zones:
// without cluster.joinService every admitted member may (the key is the
// only gate), with it only the peers Service's endpoints.
func (c *clusterState) mayOwn(addr string) bool {
	if c.peers == nil {
		return true
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return false
	}
	_, ok := c.replicaNames(ap.Addr())
	return ok
}

// remoteAdmitted is the remote port's admission: the hosts of the live
// members and, with cluster.joinService, of the peers Services' endpoints
// (a replica that just joined may ask before gossip told every owner; a
// node-local process asks without being a member). Without
// joinService, with keys, any address may try: what the TLS certificate
// proves decides.
func (c *clusterState) remoteAdmitted(a netip.Addr) bool {
	if c.peers == nil && (len(c.keys) > 0 || c.credential != nil) {
		return true
	}
	return c.memberIPs.Has(a) || c.peers.Has(a) || c.seedIPs.Has(a)
}

// seedHosts are the addresses of a node-local process's cluster.replicas,
// which answer its first question for the ring before it knows any
// member: host names are resolved once, at start.
func seedHosts(replicas []string) []netip.Addr {
	var out []netip.Addr
	for _, r := range replicas {
		host, _, err := net.SplitHostPort(r)
		if err != nil {
			continue
		}
		if a, err := netip.ParseAddr(host); err == nil {
			out = append(out, a)
			continue
		}
		addrs, _ := net.LookupHost(host)
		for _, s := range addrs {
			if a, err := netip.ParseAddr(s); err == nil {
				out = append(out, a)
			}
		}
	}
	return out
}

// remoteDialOptions dial other processes through the guard's
// credentials, from the address this process is admitted at when it can:
// the remote bind host when one is set, else the advertised host when it
// is an address of this machine. The peer pins the senders of every
// message to the address the connection comes from, and a host-network
// process dialling a pod on its own node would otherwise leave from the
// pod bridge's address, not the node's.
func remoteDialOptions(g *trust.Guard, bindHost, advertiseHost string) []grpc.DialOption {
	opts := g.DialOptions()
	ip := net.ParseIP(bindHost)
	if ip == nil || ip.IsUnspecified() {
		ip = localIP(advertiseHost)
	}
	if ip == nil {
		return opts
	}
	return append(opts, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
		return d.DialContext(ctx, "tcp", addr)
	}))
}

// localIP is host when it is a non-loopback address of one of this
// machine's interfaces, else nil.
func localIP(host string) net.IP {
	ip := net.ParseIP(host)
	if ip == nil || ip.IsLoopback() || ip.IsUnspecified() {
		return nil
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if p, ok := a.(*net.IPNet); ok && p.IP.Equal(ip) {
			return ip
		}
	}
	return nil
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
