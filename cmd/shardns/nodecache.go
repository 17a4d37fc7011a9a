package main

import (
	"flag"
	"os"

	"github.com/shardns/shardns/corefile"
)

// nodeCacheFlags adds node-cache's flags: what NodeLocal DNSCache's
// binary fills its Corefile's placeholders with (corefile.FillNodeCache),
// so that the DaemonSet's Corefile is served as it is. The Service's
// ClusterIP is read from this process's environment, as node-cache
// reads it.
func nodeCacheFlags(fl *flag.FlagSet, nc *corefile.NodeCache) {
	fl.StringVar(&nc.LocalIP, "localip", "", "node-cache's -localip: the comma-separated addresses __PILLAR__LOCAL__DNS__ stands for")
	fl.StringVar(&nc.UpstreamSvc, "upstreamsvc", corefile.DefaultUpstreamSvc, "node-cache's -upstreamsvc: the Service whose ClusterIP "+
		"__PILLAR__CLUSTER__DNS__ stands for, read from its <NAME>_SERVICE_HOST variable")
	fl.StringVar(&nc.ClusterDNS, "cluster-dns", "", "the address __PILLAR__CLUSTER__DNS__ stands for (IP or IP:port), "+
		"in place of --upstreamsvc's variable")
	fl.StringVar(&nc.UpstreamServers, "upstream-servers", "", "what __PILLAR__UPSTREAM__SERVERS__ stands for, comma-separated "+
		"(node-cache: the kube-dns ConfigMap's upstreamNameservers); empty: /etc/resolv.conf")
	nc.Getenv = os.LookupEnv
}
