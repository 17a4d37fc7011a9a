package corefile

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/forward"
)

// AskOwners makes the configuration of a NodeLocal DNSCache Corefile,
// cfg, a node-local process's (mode: nodelocal): the server blocks that
// forward the cluster's zones (k.Zones and k.ReverseZones, the base
// configuration's, which must be the replicas') to the cluster DNS at
// clusterDNS ask the zones' owners directly instead, as a node-local
// process does. Such a block keeps its chain (cache, log, ...) and loses
// only that forward; a stub of the top level (a block whose plugins are
// the main block's) that sends a cluster zone there is dropped the same
// way. Every other forward keeps its meaning: the root block still goes
// to the node's resolvers.
//
// kubernetes.zones and reverseZones become those of k that some block
// asks the owners for (a cluster zone no block sends to the cluster DNS
// stays a name like any other), pods and fallthrough k's. A Corefile none
// of whose blocks send a cluster zone to clusterDNS is an error: it would
// ask the replicas nothing.
func AskOwners(cfg *config.Config, k config.KubernetesConfig, clusterDNS string) error {
	target, err := forward.ParseUpstreams([]string{clusterDNS}, noResolvConf)
	if err != nil {
		return fmt.Errorf("the cluster DNS %q: %w", clusterDNS, err)
	}
	o := owners{cluster: slices.Concat(k.Zones, k.ReverseZones), target: target[0]}
	o.dropStubs(&cfg.Forward)
	for i := range cfg.Servers {
		o.chain(&cfg.Servers[i])
	}
	if len(o.asked) == 0 {
		return fmt.Errorf("mode: nodelocal: no server block forwards a zone of kubernetes.zones or kubernetes.reverseZones "+
			"(%s) to the cluster DNS %s, so none would ask the replicas; is it NodeLocal DNSCache's Corefile, "+
			"and %s the address its __PILLAR__CLUSTER__DNS__ stands for?", strings.Join(o.cluster, ", "), clusterDNS, clusterDNS)
	}
	cfg.Kubernetes.Zones = o.holding(k.Zones)
	cfg.Kubernetes.ReverseZones = o.holding(k.ReverseZones)
	cfg.Kubernetes.Pods, cfg.Kubernetes.Fallthrough = k.Pods, k.Fallthrough
	return nil
}

// owners is what AskOwners finds: the zones asked of the owners.
type owners struct {
	cluster []string // the cluster's zones
	target  string   // the cluster DNS, host:port
	asked   []string // zones now asked of the owners
}

// chain turns a server block whose zones all lie in the cluster's and
// whose chain forwards them to the cluster DNS into one that asks the
// owners. A chain left with no forward at all takes the top level's:
// what the owners do not know (a reverse name, with fallthrough) goes
// where the cluster DNS would have sent it, the node's resolvers.
func (o *owners) chain(s *config.ServerConfig) {
	ch := s.Chain
	if ch == nil || ch.Forward == nil || len(s.Zones) == 0 || !o.inCluster(s.Zones) {
		return
	}
	before := len(o.asked)
	o.dropStubs(ch.Forward)
	if o.toTarget(ch.Forward.Upstreams) {
		o.asked = append(o.asked, s.Zones...)
		ch.Forward.Upstreams = nil
	}
	if len(o.asked) == before {
		return
	}
	yes := true
	ch.Kubernetes = &yes
	if len(ch.Forward.Upstreams) == 0 && len(ch.Forward.Stubs) == 0 {
		ch.Forward = nil
	}
}

// dropStubs removes the stubs of f that send cluster zones to the
// cluster DNS, and notes their zones.
func (o *owners) dropStubs(f *config.ForwardConfig) {
	var kept []config.StubConfig
	for _, s := range f.Stubs {
		if o.inCluster(s.Zones) && o.toTarget(s.Upstreams) {
			o.asked = append(o.asked, s.Zones...)
			continue
		}
		kept = append(kept, s)
	}
	f.Stubs = kept
}

// inCluster reports whether every zone lies in one of the cluster's.
func (o *owners) inCluster(zones []string) bool {
	for _, z := range zones {
		if !slices.ContainsFunc(o.cluster, func(c string) bool { return under(z, c) }) {
			return false
		}
	}
	return len(zones) > 0
}

// toTarget reports whether upstreams are the cluster DNS and nothing
// else.
func (o *owners) toTarget(upstreams []string) bool {
	addrs, err := forward.ParseUpstreams(upstreams, noResolvConf)
	if err != nil || len(addrs) == 0 {
		return false
	}
	for _, a := range addrs {
		if a != o.target {
			return false
		}
	}
	return true
}

// holding lists the zones of zones that hold a zone asked of the owners.
func (o *owners) holding(zones []string) []string {
	out := []string{}
	for _, z := range zones {
		if slices.ContainsFunc(o.asked, func(a string) bool { return under(a, z) }) {
			out = append(out, z)
		}
	}
	return out
}

// under reports whether name equals zone or lies below it.
func under(name, zone string) bool {
	n := strings.ToLower(strings.TrimSuffix(name, "."))
	z := strings.ToLower(strings.TrimSuffix(zone, "."))
	return z == "" || n == z || strings.HasSuffix(n, "."+z)
}

// noResolvConf refuses to read a resolv.conf: the cluster DNS is an
// address, and a forward to a file is never to it.
func noResolvConf(string) ([]byte, error) { return nil, errors.New("not an address") }
