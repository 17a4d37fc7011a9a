// Package integration holds the tests that run shardns as users do: the
// built binary, real sockets and real clients (dig from Debian's dnsutils),
// and, for the Kubernetes source, a real etcd and kube-apiserver. They
// are in tiers, each a package whose doc lists the environment switches
// its tests read:
//
//   - functional: one process's answers, plugins, Corefiles, forwarding,
//     listeners, attacks.
//   - cluster: several replicas: handoff, failover, partitions, sharded
//     watches, coherence.
//   - nodetier: deploy/ on a real one-node Kubernetes cluster
//     (SHARDNS_NODE_TEST), the manifests and the Helm chart.
//   - bench: the measurements of `make bench` and `make soak`, gated by
//     SHARDNS_BENCH and SHARDNS_SOAK.
//
// What the tiers share (starting shardns and replicas, Kubernetes objects,
// DNS and metrics helpers, ports, the upstreams and CoreDNS beside it) is
// in harness; kubeapi runs the apiserver and etcd, kubenode the one-node
// cluster.
//
// `make integration` runs every tier, one package after another (-p 1):
// each loads the 2-core machine it was written for on its own.
// scripts/deps.sh installs the clients.
package integration
