// Package integration holds the tests that run shardns as users do: the
// built binary, real sockets and real clients (dig from Debian's dnsutils),
// and, for the Kubernetes source, a real etcd and kube-apiserver.
//
// `make integration` runs them; scripts/deps.sh installs the clients.
package integration
