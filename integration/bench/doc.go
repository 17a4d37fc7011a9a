// Package bench holds the measurements of `make bench` and `make soak`:
// shardns beside CoreDNS under dnsperf, over UDP and over TCP, DNS over
// TLS and DNS over HTTPS, a static zone beside Knot DNS and CoreDNS's
// file plugin, memory and CPU of sharded watches,
// peak memory, the scale curve, the node-local tier's cost to the
// replicas, floods against the recommended limits, and the soak. Each
// skips unless its gate is set. Beside them run the flood and idle
// connection tests whose loads the flood bench shares (TestFloodBinary,
// TestIdleConnections) and the check of the benches' service loader
// (TestLoadBenchServices), ungated, as part of `make integration`.
//
// # Switches
//
// The environment variables the tier reads, with their defaults.
//
// Gates:
//
//   - SHARDNS_BENCH (unset): set, the benches run (TestDNSPerf,
//     TestTransportPerf, TestStaticZonePerf, TestNodeLocalPerf,
//     TestBlocksPerf, TestShardedMemory,
//     TestShardedIngest, TestFloodBench, TestPeakMemory, TestScaleCurve,
//     TestNodeTierScale; TestKillWindow is in the cluster tier). `make
//     bench` sets it.
//   - SHARDNS_SOAK (unset): set, TestSoak runs. `make soak` sets it.
//
// Settings:
//
//   - SHARDNS_BENCH_TEMPLATE (unset): set, TestDNSPerf's servers both add
//     `template ANY AAAA { rcode NOERROR }` and the mix asks AAAA beside
//     every A.
//   - SHARDNS_BENCH_COREDNS (unset): "bare" runs TestDNSPerf's CoreDNS
//     without prometheus and loadbalance.
//   - SHARDNS_CHURN (10m): how long TestShardedIngest updates
//     EndpointSlices; 0 measures memory only.
//   - SHARDNS_MEMORY (unset): "0" skips TestShardedIngest's memory
//     measurements.
//   - SHARDNS_FLOOD_RATE (50000): the water torture's queries a second in
//     TestFloodBench.
//   - SHARDNS_PEAK_SERVICES (20000, at least 100): TestPeakMemory's
//     services.
//   - SHARDNS_PEAK_MODES (both): "sharded", "unsharded" or both
//     comma-separated: TestPeakMemory's watch modes.
//   - SHARDNS_PEAK_START (parallel): "serial" starts TestPeakMemory's
//     replicas one after the other, each once the one before is ready.
//   - SHARDNS_SCALE (5k,20k,50k,100k): TestScaleCurve's service counts,
//     increasing, k meaning thousands (`make bench SCALE=...`).
//   - SHARDNS_SCALE_OUT (bench-scale.tsv): where TestScaleCurve writes its
//     rows (`make bench SCALE_OUT=...`).
//   - SHARDNS_SCALE_SETTLE (30s): how long TestScaleCurve lets replicas
//     settle before reading steady RSS.
//   - SHARDNS_SCALE_REPLICAS (3 and 6): "3" or "6" keeps TestScaleCurve to
//     that replica count.
//   - SHARDNS_SCALE_WATCHES (both): "sharded" or "unsharded" keeps
//     TestScaleCurve to that kind of watches.
//   - SHARDNS_NODES (0,500,1000,1500,2000): TestNodeTierScale's simulated
//     node counts (`make bench NODES=...`).
//   - SHARDNS_NODE_WINDOW (30s): TestNodeTierScale's window per count.
//   - SHARDNS_NODE_CHURN (100): TestNodeTierScale's EndpointSlice updates
//     a second.
//   - SHARDNS_NODE_TIER_OUT (bench-node-tier.tsv): where TestNodeTierScale
//     writes its rows (`make bench NODES_OUT=...`).
//   - SHARDNS_NODE_BASELINE_BIN (unset): a second shardns binary whose
//     node-local hit rate TestNodeTierScale measures beside this one's.
//   - SHARDNS_PROFILE_DIR (unset): a folder where the benches and the soak
//     keep the replicas' CPU and heap profiles; the replicas then serve
//     http.pprof (harness.Profiled), which they do not otherwise, as its
//     heap sampling would count in their RSS.
//   - SOAK_DURATION (10m, at least 2m): how long TestSoak runs (`make soak
//     SOAK_DURATION=...`).
//   - SHARDNS_COREDNS (built): the CoreDNS binary the benches compare with
//     (integration/scripts/build-coredns.sh).
//
// TestStaticZonePerf takes knotd from PATH (Debian's knot package, which
// scripts/deps.sh installs) and skips, saying so, without it.
//   - SHARDNS_KUBE_APISERVER (built): the kube-apiserver binary
//     (integration/scripts/build-apiserver.sh; etcd comes from PATH).
//   - SHARDNS_CACHE ($XDG_CACHE_HOME/shardns, else ~/.cache/shardns): where
//     the build scripts keep what they build.
//
// Paths given relative (SHARDNS_SCALE_OUT, SHARDNS_NODE_TIER_OUT,
// SHARDNS_PROFILE_DIR) are read from integration/bench, the tests'
// working directory; `make bench` gives absolute ones.
package bench
