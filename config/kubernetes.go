package config

import (
	"fmt"
	"slices"
	"strings"
)

// KubernetesConfig is the Kubernetes records and the API source.
type KubernetesConfig struct {
	// Enabled watches the Kubernetes API.
	Enabled bool `json:"enabled"`
	// Kubeconfig path; empty uses the in-cluster service account.
	Kubeconfig string `json:"kubeconfig"`
	// Context of Kubeconfig to connect with; empty uses its current
	// context. CoreDNS's kubeconfig takes one too.
	Context string `json:"context"`
	// Zones are the cluster domains served. Empty serves no cluster
	// names (a Corefile without the kubernetes plugin): then the API
	// source, the manifests and every other cluster zone must be off too.
	Zones []string `json:"zones"`
	// ReverseZones are the reverse zones served (PTR of cluster addresses).
	ReverseZones []string `json:"reverseZones"`
	// TTL of every cluster record, 0–3600 seconds.
	TTL *int `json:"ttl"`
	// Pods is disabled, insecure or verified.
	Pods string `json:"pods"`
	// EndpointPodNames names endpoints without a hostname after their pod.
	EndpointPodNames bool `json:"endpointPodNames"`
	// Namespaces exposed; empty exposes all.
	Namespaces []string `json:"namespaces"`
	// NamespaceSelector is a label selector of the namespaces exposed.
	NamespaceSelector string `json:"namespaceSelector"`
	// LabelSelector restricts the services and endpoints watched.
	LabelSelector string `json:"labelSelector"`
	// IgnoreEmptyService answers NXDOMAIN for services without endpoints.
	IgnoreEmptyService bool `json:"ignoreEmptyService"`
	// NoEndpoints serves no endpoint records.
	NoEndpoints bool `json:"noEndpoints"`
	// ShardedWatch lets a replica of a cluster watch only the namespaces
	// it owns when the API server shards watches (nil: true).
	ShardedWatch *bool `json:"shardedWatch"`
	// Fallthrough zones pass NXDOMAIN on to the forwarder.
	Fallthrough []string `json:"fallthrough"`
	// StartupTimeout bounds how long cluster names get SERVFAIL before the
	// first sync.
	StartupTimeout Duration `json:"startupTimeout"`
	// External publishes Services' external and load balancer IPs under
	// zones of their own, as CoreDNS's k8s_external; nil publishes none.
	External *ExternalConfig `json:"external"`
	// Multicluster are the zones of the Multi-Cluster Services API
	// (clusterset.local), as CoreDNS's `multicluster ZONES`: their
	// <service>.<namespace>.svc names answer ServiceImports and the
	// EndpointSlices imported for them; empty serves none.
	Multicluster []string `json:"multicluster"`
	// Topology orders the answers of headless Services for the zone of
	// the node this process runs on, following the EndpointSlices' hints
	// (and trafficDistribution: PreferClose): off (default), prefer (the
	// zone's endpoints first) or only (them alone); a zone with none
	// gets every ready endpoint.
	Topology string `json:"topology"`
	// NodeName is the Node whose topology.kubernetes.io/zone label is
	// this process's zone; empty: the NODE_NAME environment variable
	// (spec.nodeName in the deploy/ manifests).
	NodeName string `json:"nodeName"`
	// NodeZone is this process's zone, given instead of read from its
	// Node (no API access needed).
	NodeZone string `json:"nodeZone"`
	// APIServerQPS and APIServerBurst bound the requests this process
	// makes to the API server, one token bucket for them all (CoreDNS's
	// apiserver_qps and apiserver_burst); 0: client-go's 5 per second,
	// burst 10.
	APIServerQPS   float64 `json:"apiserverQPS"`
	APIServerBurst int     `json:"apiserverBurst"`
	// APIServerMaxInflight bounds the requests waiting on the API server
	// at once (apiserver_max_inflight): a request holds its place until
	// the response headers come, so a watch holds none once started;
	// 0: no bound.
	APIServerMaxInflight int `json:"apiserverMaxInflight"`
}

// ExternalConfig is CoreDNS's k8s_external: <service>.<namespace>.<zone>
// answers a Service's spec.externalIPs and load balancer ingress IPs.
type ExternalConfig struct {
	// Zones the names are published in; none may overlap a cluster or
	// multicluster zone. A reverse zone among them answers the PTRs of
	// external IPs, and may lie in (or hold) a kubernetes.reverseZones
	// zone, which answers first.
	Zones []string `json:"zones"`
	// Apex is the label of the zones' own names (ns1.<apex>.<zone>);
	// empty: dns.
	Apex string `json:"apex"`
	// TTL of the records, 0–3600 seconds; nil: 5.
	TTL *int `json:"ttl"`
	// Headless answers headless Services without external IPs from their
	// ready endpoints, and <endpoint>.<service>.<namespace>.<zone>.
	Headless bool `json:"headless"`
	// Fallthrough zones pass a name that does not exist on to the
	// forwarder (k8s_external's fallthrough; bare, it is Zones).
	Fallthrough []string `json:"fallthrough"`
	// TransferTo lists the addresses (IPs or CIDRs, "*" for any) allowed
	// to transfer the zones (AXFR, IXFR) over TCP, as the transfer
	// plugin's `to`; empty: nobody.
	TransferTo []string `json:"transferTo"`
}

// ApexLabel is Apex, or its default.
func (e *ExternalConfig) ApexLabel() string {
	if e.Apex == "" {
		return "dns"
	}
	return strings.ToLower(e.Apex)
}

// TTLSeconds is TTL, or its default.
func (e *ExternalConfig) TTLSeconds() int {
	if e.TTL == nil {
		return 5
	}
	return *e.TTL
}

// Sharded reports kubernetes.shardedWatch, true unless set false.
func (k *KubernetesConfig) Sharded() bool { return k.ShardedWatch == nil || *k.ShardedWatch }

// AllZones returns the cluster and the reverse zones, the names whose
// records the Kubernetes source owns.
func (k *KubernetesConfig) AllZones() []string {
	return slices.Concat(k.Zones, k.ReverseZones, k.Multicluster)
}

func (c *Config) validateKubernetes(bad func(key, format string, args ...any)) {
	k := &c.Kubernetes
	if len(k.Zones) == 0 {
		c.checkNoClusterDomain(bad)
	}
	checkZones(bad, "kubernetes.zones", k.Zones, true)
	if slices.Contains(k.Zones, ".") {
		// Every name is a cluster name then (what CoreDNS serves for a
		// kubernetes plugin in a "." block): nothing else can be reached.
		if len(k.Zones) > 1 {
			bad("kubernetes.zones", "\".\" holds every other zone: list it alone")
		}
		if len(c.Forward.Stubs) > 0 || c.FilesOutsideBlocks() || c.Istio.Enabled {
			bad("kubernetes.zones", "\".\" makes every name a cluster name: stub domains, zone files and Istio hosts would never be asked")
		}
	}
	for i, z := range k.ReverseZones {
		n := strings.ToLower(strings.TrimSuffix(z, "."))
		underReverse := n == "in-addr.arpa" || n == "ip6.arpa" ||
			strings.HasSuffix(n, ".in-addr.arpa") || strings.HasSuffix(n, ".ip6.arpa")
		if !ValidDomain(z) || !underReverse {
			bad(fmt.Sprintf("kubernetes.reverseZones[%d]", i), "%q is not under in-addr.arpa or ip6.arpa", z)
		}
	}
	if k.TTL == nil || *k.TTL < 0 || *k.TTL > 3600 {
		v := "missing"
		if k.TTL != nil {
			v = fmt.Sprint(*k.TTL)
		}
		bad("kubernetes.ttl", "must be between 0 and 3600, got %s", v)
	}
	switch k.Pods {
	case "disabled", "insecure":
	case "verified":
		// A node-local process asks the replicas for pod zones.
		if !k.Enabled && c.Mode != ModeNodeLocal {
			bad("kubernetes.pods", "verified needs the Kubernetes API source (kubernetes.enabled: true)")
		}
	default:
		bad("kubernetes.pods", "must be disabled, insecure or verified, got %q", k.Pods)
	}
	for _, l := range []struct {
		key string
		v   float64
	}{{"apiserverQPS", k.APIServerQPS}, {"apiserverBurst", float64(k.APIServerBurst)}, {"apiserverMaxInflight", float64(k.APIServerMaxInflight)}} {
		if l.v < 0 {
			bad("kubernetes."+l.key, "must not be negative (0: client-go's default)")
		}
	}
	if k.StartupTimeout < 0 {
		bad("kubernetes.startupTimeout", "must not be negative")
	}
	if k.Context != "" && k.Kubeconfig == "" {
		// The in-cluster service account has no contexts to choose from.
		bad("kubernetes.context", "needs kubernetes.kubeconfig")
	}
	checkZones(bad, "kubernetes.fallthrough", k.Fallthrough, true)
	if !ValidTopology(k.Topology) {
		bad("kubernetes.topology", "must be off, prefer or only, got %q", k.Topology)
	}
	if k.External != nil {
		c.validateExternal(bad)
	}
	c.validateMulticluster(bad)
}

// checkNoClusterDomain accepts kubernetes.zones: [] only where nothing
// would need a cluster domain: records of the API or the manifests are
// named under one, and PTR, multicluster and external answers name their
// services under the first.
func (c *Config) checkNoClusterDomain(bad func(key, format string, args ...any)) {
	k := &c.Kubernetes
	var needs []string
	for _, n := range []struct {
		key string
		set bool
	}{
		{"kubernetes.enabled", k.Enabled}, {"manifests.files", len(c.Manifests.Files) > 0},
		{"kubernetes.reverseZones", len(k.ReverseZones) > 0}, {"kubernetes.multicluster", len(k.Multicluster) > 0},
		{"kubernetes.external", k.External != nil},
	} {
		if n.set {
			needs = append(needs, n.key)
		}
	}
	if len(needs) > 0 {
		bad("kubernetes.zones", "needs at least one cluster domain for %s (empty serves no cluster names)", strings.Join(needs, ", "))
	}
}

// validateMulticluster checks kubernetes.multicluster.
func (c *Config) validateMulticluster(bad func(key, format string, args ...any)) {
	k := &c.Kubernetes
	if len(k.Multicluster) > 0 && !k.Enabled && c.Mode != ModeNodeLocal {
		bad("kubernetes.multicluster", "needs the Kubernetes API source (kubernetes.enabled: true): ServiceImports are read from it")
	}
	checkZones(bad, "kubernetes.multicluster", k.Multicluster, false)
	own := slices.Concat(k.Zones, k.ReverseZones)
	for i, z := range k.Multicluster {
		key := fmt.Sprintf("kubernetes.multicluster[%d]", i)
		for _, o := range own {
			if underZone(z, o) || underZone(o, z) {
				bad(key, "%q overlaps %q, a zone of kubernetes.zones or kubernetes.reverseZones: "+
					"a zone is either a cluster domain or a multicluster one; list it in one of them", z, o)
			}
		}
		for _, other := range k.Multicluster[:i] {
			if underZone(z, other) || underZone(other, z) {
				bad(key, "%q overlaps %q, listed before it", z, other)
			}
		}
	}
}

// reverseDomain reports whether z lies in in-addr.arpa or ip6.arpa.
func reverseDomain(z string) bool {
	z = strings.TrimSuffix(strings.ToLower(z), ".")
	return underZone(z, "in-addr.arpa") || underZone(z, "ip6.arpa")
}

// validateExternal checks kubernetes.external.
func (c *Config) validateExternal(bad func(key, format string, args ...any)) {
	k := &c.Kubernetes
	e := k.External
	if len(e.Zones) == 0 {
		bad("kubernetes.external.zones", "needs at least one zone")
	}
	checkZones(bad, "kubernetes.external.zones", e.Zones, false)
	for i, z := range e.Zones {
		for _, own := range k.AllZones() {
			if reverseDomain(z) && slices.Contains(k.ReverseZones, own) {
				// A reverse zone of both: the kubernetes plugin answers
				// first, and k8s_external what falls through it.
				continue
			}
			if underZone(z, own) || underZone(own, z) {
				bad(fmt.Sprintf("kubernetes.external.zones[%d]", i), "%q overlaps %q, a zone of kubernetes.zones, kubernetes.reverseZones or "+
					"kubernetes.multicluster: its names would be answered as cluster names; choose a zone of its own", z, own)
			}
		}
	}
	if e.Apex != "" && (strings.Contains(e.Apex, ".") || !ValidDomain(e.Apex)) {
		bad("kubernetes.external.apex", "must be one DNS label, got %q", e.Apex)
	}
	if t := e.TTLSeconds(); t < 0 || t > 3600 {
		bad("kubernetes.external.ttl", "must be between 0 and 3600, got %d", t)
	}
	checkZones(bad, "kubernetes.external.fallthrough", e.Fallthrough, false)
	checkTransferTo(bad, "kubernetes.external.transferTo", e.TransferTo)
}
