package harness

import (
	"fmt"
	"testing"

	"github.com/shardns/shardns/httpapi"
)

// StartNodeLocalProcess starts the binary in mode nodelocal, reading the
// ring from the replica whose actor remote listens on seedRemote.
func StartNodeLocalProcess(t testing.TB, name, seedRemote string) *Replica {
	t.Helper()
	cfg := fmt.Sprintf(`
mode: nodelocal
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0", lameduck: 0s}
forward: {upstreams: []}
cluster:
  nodeName: %s
  replicas: [%q]
  remote: "127.0.0.1:%d"
  gossip: fast
`, name, seedRemote, FreePort(t))
	p := Start(t, Options{Config: cfg})
	return &Replica{Process: p, HTTP: p.HTTPAddr(t)}
}

// RemoteOf is the actor remote address of the replica r.
func RemoteOf(t testing.TB, r *Replica) string {
	t.Helper()
	ring, err := r.Ring(t)
	if err != nil {
		t.Fatal(err)
	}
	return SelfRemote(t, ring)
}

// SelfRemote is the actor remote address ring's own member advertises.
func SelfRemote(t testing.TB, ring httpapi.Ring) string {
	t.Helper()
	for _, m := range ring.Members {
		if m.Name == ring.Self && m.Remote != "" {
			return m.Remote
		}
	}
	t.Fatalf("%s is not in its own ring: %+v", ring.Self, ring.Members)
	return ""
}
