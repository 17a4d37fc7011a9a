// Package cluster tests several shardns replicas together, each a
// process of the built binary on a real kube-apiserver: zones handed off
// and fetched, replicas killed, stopped, added and partitioned (network
// namespaces), sharded watches, the answers staying coherent while the
// ring changes, and how long queries fail when one replica dies
// (TestKillWindow).
//
// `make integration` runs it with the other tiers, one after another.
//
// # Switches
//
// The environment variables the tier reads, with their defaults:
//
//   - SHARDNS_BENCH (unset): set, TestKillWindow runs (it is one of `make
//     bench`'s measurements and skips otherwise).
//   - SHARDNS_PROFILE_DIR (unset): set, the replicas serve http.pprof
//     (harness.Profiled).
//   - SHARDNS_KUBE_APISERVER (built): the kube-apiserver binary
//     (integration/scripts/build-apiserver.sh; etcd comes from PATH).
//   - SHARDNS_CACHE ($XDG_CACHE_HOME/shardns, else ~/.cache/shardns): where
//     the build scripts keep what they build.
//
// TestPartition needs root (network namespaces) and skips without it.
package cluster
