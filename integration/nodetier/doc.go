// Package nodetier tests deploy/ as users install it: TestNode brings up
// a real one-node Kubernetes cluster on this machine (integration/kubenode:
// kubelet, containerd, kube-proxy, the control plane) and checks `kubectl
// apply -k deploy/`, names resolved from pods through kubelet's cluster
// DNS, scaling and a rolling update under queries, strangers refused, the
// node-local overlay, the switch from CoreDNS and back, and the Helm
// chart's install, upgrade and rollback. Beside it, the manifests and the
// chart it installs are checked against a real kube-apiserver (TestDeploy*,
// TestHelm*), and the image runs as containers (TestContainerReplicas,
// skipped without Docker).
//
// `make integration` runs it with the other tiers; `make node-test` runs
// TestNode alone.
//
// # Switches
//
// The environment variables the tier reads, with their defaults:
//
//   - SHARDNS_NODE_TEST (unset): set, TestNode runs. It needs root and
//     Docker and adds a bridge, iptables rules and mounts to the host while
//     it runs, which `go test` should not do unasked; `make integration`
//     and `make node-test` set it.
//   - SHARDNS_HELM (built): the helm CLI (integration/scripts/build-helm.sh).
//   - SHARDNS_COREDNS (built): the CoreDNS binary TestNode switches from
//     (integration/scripts/build-coredns.sh).
//   - SHARDNS_KUBE_APISERVER (built): the kube-apiserver binary
//     (integration/scripts/build-apiserver.sh; etcd comes from PATH).
//   - SHARDNS_CACHE ($XDG_CACHE_HOME/shardns, else ~/.cache/shardns): where
//     the build scripts (build-node.sh among them) keep what they build.
package nodetier
