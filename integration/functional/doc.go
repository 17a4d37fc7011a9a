// Package functional tests what one shardns process answers, run as
// users run it (the built binary, real sockets, dig, kdig and Go clients,
// a real kube-apiserver and etcd): the answers of every source, the
// plugins and Corefiles beside CoreDNS's on the same questions, forward
// to real upstreams (Unbound), the listeners (TLS, HTTPS), the node-local
// cache, monitoring, and attacks on a process (malformed packets, slow
// clients, hostile and forged peers).
//
// `make integration` runs it with the other tiers, one after another.
//
// # Switches
//
// The environment variables the tier reads, with their defaults:
//
//   - SHARDNS_HTTP_ATTACK_CONNS (4000): TestHTTPSlowHeaders's connections.
//   - SHARDNS_FORGERY_ATTACK, SHARDNS_HOSTILE_ATTACK (unset): set by
//     TestCompromisedNodeCannotForge and the hostile tests for the test
//     binary they start again as an attacker (TestForgeryAttacker,
//     TestHostileAttacker, which skip without them); TestMain then builds
//     nothing. Not for setting by hand.
//   - SHARDNS_PROFILE_DIR (unset): set, the replicas the tests start serve
//     http.pprof (harness.Profiled); they do not otherwise, as its heap
//     sampling would count in their RSS.
//   - SHARDNS_KUBE_APISERVER (built): the kube-apiserver binary
//     (integration/kubeapi, built once by integration/scripts/build-apiserver.sh;
//     etcd comes from PATH, Debian's etcd-server).
//   - SHARDNS_COREDNS (built): the CoreDNS binary the tests compare with
//     (integration/scripts/build-coredns.sh).
//   - SHARDNS_CACHE ($XDG_CACHE_HOME/shardns, else ~/.cache/shardns): where
//     the build scripts keep what they build.
package functional
