// Package harness runs shardns the way the integration tests need it: the
// built binary as a Process (Start with Options) or a node in the test's
// own Process, replicas of a cluster, the Kubernetes objects the sources
// read, DNS and /metrics helpers, free loopback ports, and the upstreams
// and comparison servers (Unbound, CoreDNS) the tests Ask beside shardns.
//
// Every helper takes a testing.TB and fails it, rather than returning an
// error, unless its name starts with Try.
package harness
