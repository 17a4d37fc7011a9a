// Package integration holds the tests that run shardns as users do: the
// built binary, real sockets and real clients (dig from Debian's dnsutils),
// and, for the Kubernetes source, a real etcd and kube-apiserver. What
// they share (starting shardns, replicas, Kubernetes objects, DNS and
// metrics helpers, ports) is in integration/harness.
//
// `make integration` runs them; scripts/deps.sh installs the clients.
//
// # Switches
//
// Every environment variable the tests read, its default and what it
// does. Unset, `go test ./integration` runs the functional and cluster
// tests and skips the rest.
//
// Gates (each test they gate is skipped without it):
//
//   - SHARDNS_NODE_TEST (unset): set to anything, TestNode runs deploy/ on
//     the one-node Kubernetes cluster integration/kubenode brings up on
//     this machine. Needs root and Docker; it adds a bridge, iptables
//     rules and mounts while it runs. `make integration` and `make
//     node-test` set it.
//   - SHARDNS_BENCH (unset): set to anything, the benches run (TestDNSPerf,
//     TestNodeLocalPerf, TestBlocksPerf, TestShardedMemory,
//     TestShardedIngest, TestKillWindow, TestFloodBench, TestPeakMemory,
//     TestScaleCurve, TestNodeTierScale). `make bench` sets it.
//   - SHARDNS_SOAK (unset): set to anything, TestSoak runs. `make soak`
//     sets it.
//
// Bench and soak settings:
//
//   - SHARDNS_BENCH_TEMPLATE (unset): set, TestDNSPerf's servers both add
//     `template ANY AAAA { rcode NOERROR }` and the mix asks AAAA beside
//     every A.
//   - SHARDNS_BENCH_COREDNS (unset): "bare" runs TestDNSPerf's CoreDNS
//     without prometheus and loadbalance.
//   - SHARDNS_CHURN (10m): how long TestShardedIngest updates
//     EndpointSlices; 0 measures memory only.
//   - SHARDNS_MEMORY (unset): "0" skips TestShardedIngest's memory
//     measurements, the churn only.
//   - SHARDNS_FLOOD_RATE (50000): the water torture's queries a second in
//     TestFloodBench.
//   - SHARDNS_PEAK_SERVICES (20000, at least 100): TestPeakMemory's
//     services.
//   - SHARDNS_PEAK_MODES (both): "sharded" or "unsharded" (comma-separated)
//     keeps TestPeakMemory to those watch modes.
//   - SHARDNS_PEAK_START (parallel): "serial" starts TestPeakMemory's
//     replicas one after the other, each once the one before is ready.
//   - SHARDNS_SCALE (5k,20k,50k,100k): TestScaleCurve's service counts,
//     increasing, a k meaning thousands. `make bench SCALE=...` sets it.
//   - SHARDNS_SCALE_OUT (bench-scale.tsv): where TestScaleCurve writes its
//     rows.
//   - SHARDNS_SCALE_SETTLE (30s): how long TestScaleCurve lets replicas
//     settle before reading steady RSS.
//   - SHARDNS_SCALE_REPLICAS (3 and 6): "3" or "6" keeps TestScaleCurve to
//     that replica count.
//   - SHARDNS_SCALE_WATCHES (both): "sharded" or "unsharded" keeps
//     TestScaleCurve to that kind of watches.
//   - SHARDNS_NODES (0,500,1000,1500,2000): TestNodeTierScale's simulated
//     node counts. `make bench NODES=...` sets it.
//   - SHARDNS_NODE_WINDOW (30s): TestNodeTierScale's measuring window per
//     node count.
//   - SHARDNS_NODE_CHURN (100): TestNodeTierScale's EndpointSlice updates
//     a second.
//   - SHARDNS_NODE_TIER_OUT (bench-node-tier.tsv): where TestNodeTierScale
//     writes its rows.
//   - SHARDNS_NODE_BASELINE_BIN (unset): a second shardns binary whose
//     node-local hit rate TestNodeTierScale measures beside this one's.
//   - SHARDNS_PROFILE_DIR (unset): a folder where the benches and the soak
//     keep CPU and heap profiles of the replicas; replicas then serve
//     http.pprof (harness.Profiled), which they do not otherwise, as its
//     heap sampling would count in their RSS.
//   - SOAK_DURATION (10m, at least 2m): how long TestSoak runs. `make soak
//     SOAK_DURATION=...` sets it.
//
// Attack settings:
//
//   - SHARDNS_HTTP_ATTACK_CONNS (4000): TestHTTPSlowHeaders's connections.
//   - SHARDNS_FORGERY_ATTACK, SHARDNS_HOSTILE_ATTACK (unset): set by
//     TestForgery* and TestHostile* for the test binary they start again
//     as an attacker process (TestForgeryAttacker, TestHostileAttacker);
//     not for setting by hand.
//
// Binaries the tests otherwise build once into the cache
// (integration/scripts/build-*.sh):
//
//   - SHARDNS_KUBE_APISERVER (built): the kube-apiserver binary
//     (integration/kubeapi; etcd comes from PATH, Debian's etcd-server).
//   - SHARDNS_COREDNS (built): the CoreDNS binary the comparisons and
//     benches run.
//   - SHARDNS_HELM (built): the helm CLI of the Helm tests.
//   - SHARDNS_CACHE ($XDG_CACHE_HOME/shardns, else ~/.cache/shardns): where
//     the build scripts keep what they build.
package integration
