package main

import (
	"bytes"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/corefile"
	"github.com/shardns/shardns/node"
)

// corefileSource serves a CoreDNS Corefile as it is (serve --corefile),
// or a kube-dns ConfigMap (serve --kube-dns-configmap): converted in
// memory at start and whenever it, a file it imports, or the base
// configuration changes. The Corefile decides what a Corefile can say;
// the base configuration (--config, optional) decides what it cannot:
// mode, cluster (sharding and trust), memory, log.level and log.format,
// the kubeconfig when the Corefile names none, and the node of
// federation answers; for a kube-dns ConfigMap also where to listen and
// how to reach the API server (kubeDNSFlagsFromBase); in mode: nodelocal
// also the cluster's zones and nodeLocal (askOwners).
type corefileSource struct {
	path    string // the Corefile, or the kube-dns ConfigMap
	kubeDNS bool   // path is a kube-dns ConfigMap
	// kubeDNSOptions are the cluster domain and port of its Corefile.
	kubeDNSOptions corefile.KubeDNSOptions
	// nodeCache fills the placeholders of NodeLocal DNSCache's Corefile.
	nodeCache corefile.NodeCache
	base      string // the base configuration file; "" for none
}

// convert reads and converts path.
func (s corefileSource) convert() (*corefile.Loaded, error) {
	if s.kubeDNS {
		return corefile.LoadKubeDNS(s.path, s.kubeDNSOptions)
	}
	return corefile.LoadFile(s.path, os.LookupEnv, s.nodeCache)
}

// load builds the configuration. A Corefile line with no equivalent is
// an error: at start the process does not serve, on a reload the running
// configuration keeps serving.
func (s corefileSource) load() (*config.Config, error) {
	l, err := s.convert()
	if err != nil {
		return nil, err
	}
	cfg, err := l.Config()
	if err != nil {
		return nil, err
	}
	if s.base == "" {
		return cfg, nil
	}
	base, err := config.Load(s.base)
	if err != nil {
		return nil, err
	}
	cfg.Mode, cfg.Cluster, cfg.Memory = base.Mode, base.Cluster, base.Memory
	cfg.Log.Level, cfg.Log.Format = base.Log.Level, base.Log.Format
	// Who may read /debug/ring is deployment, not DNS: no Corefile
	// plugin says it.
	cfg.HTTP.Debug = base.HTTP.Debug
	// Where this process reaches the API and which node it runs on are
	// deployment, not DNS: a kube-dns ConfigMap cannot say them, and a
	// Corefile without a kubeconfig connects in-cluster.
	if k := base.Kubernetes; cfg.Kubernetes.Kubeconfig == "" {
		cfg.Kubernetes.Kubeconfig, cfg.Kubernetes.Context = k.Kubeconfig, k.Context
	}
	if f := base.Federation; f.NodeName != "" || f.NodeZone != "" {
		cfg.Federation.NodeName, cfg.Federation.NodeZone, cfg.Federation.NodeRegion = f.NodeName, f.NodeZone, f.NodeRegion
	}
	if s.kubeDNS {
		if err := kubeDNSFlagsFromBase(cfg, base, s.base); err != nil {
			return nil, err
		}
	} else if base.Mode == config.ModeNodeLocal {
		if err := s.askOwners(cfg, base); err != nil {
			return nil, err
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("%s with %s: %w", s.path, s.base, err)
	}
	return cfg, nil
}

// read is every file the configuration is built from, names and
// contents: the Corefile is parsed again, so that a file a glob import
// matches from now on counts too.
func (s corefileSource) read() ([]byte, error) {
	l, err := s.convert()
	if err != nil {
		// A broken Corefile is a change too: load reports it.
		src, rerr := os.ReadFile(s.path)
		if rerr != nil {
			return nil, rerr
		}
		return append([]byte("unparsed\x00"), src...), nil
	}
	data, err := l.Contents()
	if err != nil || s.base == "" {
		return data, err
	}
	base, err := os.ReadFile(s.base)
	return bytes.Join([][]byte{data, base}, []byte{0}), err
}

// option is the node's configuration source.
func (s corefileSource) option() node.Option {
	return node.WithConfigSource(node.ConfigSource{Read: s.read, Load: s.load})
}

// kubeDNSFlagsFromBase gives cfg the base's dns.listen, http.listen,
// http.metricsListen, kubernetes.kubeconfig and kubernetes.context where
// the base file sets them. A kube-dns ConfigMap says neither where to
// listen nor how to reach the API server: kube-dns took those as flags
// (--dns-bind-address, --dns-port, --kubecfg-file), and the Corefile of
// the migration fixes them to port 53 and the pod's service account. A
// key the base leaves out keeps the migration's value, so a base written
// for sharding alone changes nothing of it.
func kubeDNSFlagsFromBase(cfg, base *config.Config, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var set map[string]map[string]any
	if err := yaml.Unmarshal(data, &set); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	has := func(section, key string) bool {
		_, ok := set[section][key]
		return ok
	}
	if has("dns", "listen") {
		cfg.DNS.Listen = base.DNS.Listen
	}
	if has("http", "listen") {
		cfg.HTTP.Listen = base.HTTP.Listen
	}
	if has("http", "metricsListen") {
		cfg.HTTP.MetricsListen = base.HTTP.MetricsListen
	}
	if has("kubernetes", "kubeconfig") {
		cfg.Kubernetes.Kubeconfig = base.Kubernetes.Kubeconfig
	}
	if has("kubernetes", "context") {
		cfg.Kubernetes.Context = base.Kubernetes.Context
	}
	return nil
}

// askOwners makes a NodeLocal DNSCache Corefile served in mode: nodelocal
// ask the zones' owners for the cluster's names in place of the cluster
// DNS it forwards them to (__PILLAR__CLUSTER__DNS__, the kube-dns
// Service): corefile.AskOwners. Which zones are the cluster's, the
// replicas' pods setting and the node's clients (nodeLocal) come from
// the base, as a Corefile without a kubernetes plugin cannot say them.
func (s corefileSource) askOwners(cfg, base *config.Config) error {
	dns, err := s.nodeCache.ClusterDNSAddr()
	if err != nil {
		return fmt.Errorf("%s with %s (mode: nodelocal): the cluster DNS the Corefile forwards the cluster's names to: %w", s.path, s.base, err)
	}
	cfg.NodeLocal = base.NodeLocal
	if err := corefile.AskOwners(cfg, base.Kubernetes, dns); err != nil {
		return fmt.Errorf("%s with %s: %w", s.path, s.base, err)
	}
	return nil
}
