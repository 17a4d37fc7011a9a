package cluster

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// Partitions between replicas: three replica processes, each in a network
// namespace of its own (netns_test.go), fed the same cluster from YAML,
// under a steady verified load from the host to all three. One replica is
// cut off from the other two, first both ways and then only what it
// receives from them, for partitionCut each, and healed. The clients are
// never cut off: they keep asking the cut replica too.

const (
	partitionCut        = 30 * time.Second
	partitionNamespaces = 9
	partitionRate       = 150 // queries a second, over the three replicas
	// answerWithin is how soon every question must be answered, cut or
	// not: a client that hears nothing by then has waited its timeout
	// for nothing, where a SERVFAIL or a stale answer let it go on.
	answerWithin = time.Second
	// convergeWithin bounds the time from a heal until every ring lists
	// every replica and every replica answers every question right.
	convergeWithin = 5 * time.Second
)

// nsReplica is a replica process in a namespace of its own.
type nsReplica struct {
	*harness.Replica
	ns, ip string
}

// partitionCluster writes the cluster's YAML and returns its path and the
// questions of the load with their right answers: the A record of a
// Service in each namespace, the PTR of its address (a reverse zone each),
// and (NXDOMAIN) a name asked once in each namespace.
func partitionCluster(t *testing.T) (path string, qs []loadQuestion) {
	t.Helper()
	var y strings.Builder
	for k := 1; k <= partitionNamespaces; k++ {
		ip := fmt.Sprintf("10.96.%d.10", k)
		name := fmt.Sprintf("web.p%d.svc.cluster.local.", k)
		fmt.Fprintf(&y, `apiVersion: v1
kind: Namespace
metadata: {name: p%[1]d}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: p%[1]d}
spec:
  clusterIP: %[2]s
  ports: [{name: http, port: 80, protocol: TCP}]
---
`, k, ip)
		rev, _ := dns.ReverseAddr(ip)
		qs = append(qs,
			loadQuestion{name: name, qtype: dns.TypeA, want: rightAnswer(t, name+" 0 IN A "+ip)},
			loadQuestion{name: rev, qtype: dns.TypePTR, want: rightAnswer(t, rev+" 0 IN PTR "+name)})
	}
	path = filepath.Join(t.TempDir(), "cluster.yaml")
	if err := os.WriteFile(path, []byte(y.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, qs
}

// rightAnswer is the canonical form of a NOERROR answer of one record.
func rightAnswer(t *testing.T, record string) string {
	t.Helper()
	rr, err := dns.NewRR(record)
	if err != nil {
		t.Fatal(err)
	}
	return "NOERROR " + strings.ToLower(rr.String())
}

// startPartitionReplicas starts three replicas, one per namespace of lab,
// each listing all three as seeds, with one gossip key.
func startPartitionReplicas(t *testing.T, lab *netLab, cluster string, rf int) []*nsReplica {
	t.Helper()
	key := make([]byte, 32)
	rand.Read(key)
	keyFile := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)), 0o600); err != nil {
		t.Fatal(err)
	}
	var nss, ips, seeds []string
	for i := 1; i <= 3; i++ {
		ns, ip := lab.addNode(i)
		nss, ips, seeds = append(nss, ns), append(ips, ip), append(seeds, fmt.Sprintf("%q", ip+":7946"))
	}
	var rs []*nsReplica
	for i := range 3 {
		cfg := fmt.Sprintf(`
dns: {listen: ["%[1]s:53"]}
http: {listen: "%[1]s:8080", debug: [%[7]q]} # the test reads /debug/ring from the host's end of the lab
kubernetes: {enabled: false}
manifests: {files: [%[2]q]}
forward: {upstreams: []}
cluster:
  nodeName: part%[3]d
  join: [%[4]s]
  bind: "%[1]s:7946"
  remote: "%[1]s:8090"
  replicationFactor: %[5]d
  secretKeyFile: %[6]q
`, ips[i], cluster, i, strings.Join(seeds, ", "), rf, keyFile, lab.host)
		path := filepath.Join(t.TempDir(), "shardns.yaml")
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		p := harness.Start(t, harness.Options{Cmd: exec.Command("ip", "netns", "exec", nss[i], harness.Bin, "serve", "--config", path)})
		rs = append(rs, &nsReplica{Replica: &harness.Replica{Process: p, HTTP: p.HTTPAddr(t)}, ns: nss[i], ip: ips[i]})
	}
	return rs
}

// converged reports why the replicas have not converged yet, or nil:
// each lists all three members, owners and none down, and answers every
// question right.
func converged(rs []*nsReplica, qs []loadQuestion) error {
	for _, r := range rs {
		ring, err := r.Ring(nil)
		if err != nil {
			return err
		}
		if len(ring.Members) != len(rs) {
			return fmt.Errorf("%s sees %d members, want %d", ring.Self, len(ring.Members), len(rs))
		}
		for _, m := range ring.Members {
			if !m.Owner || m.Down {
				return fmt.Errorf("%s sees %s as owner %t, down %t", ring.Self, m.Name, m.Owner, m.Down)
			}
		}
	}
	for _, r := range rs {
		for _, q := range qs {
			m, err := testutil.Exchange(r.Addr, "udp", q.name, q.qtype)
			if err != nil {
				return err
			}
			if got := canonical(m); got != q.want {
				return fmt.Errorf("%s %s from %s: %q, want %q", q.name, dns.TypeToString[q.qtype], r.Addr, got, q.want)
			}
		}
	}
	return nil
}

// servedOnce reports a zone that more than one replica serves from its
// own state, or that none does, or nil: with replicationFactor 1 each of
// the 2×partitionNamespaces zones has one owner, and nothing else is
// held over from a handoff.
func servedOnce(rs []*nsReplica) error {
	by := map[string][]string{}
	for _, r := range rs {
		ring, err := r.Ring(nil)
		if err != nil {
			return err
		}
		for _, z := range ring.Served {
			by[z] = append(by[z], ring.Self)
		}
	}
	if len(by) != 2*partitionNamespaces {
		return fmt.Errorf("%d zones served, want %d", len(by), 2*partitionNamespaces)
	}
	for z, who := range by {
		if len(who) != 1 {
			return fmt.Errorf("%s is served by %v", z, who)
		}
	}
	return nil
}

// logRings logs what each replica sees: its members and how many zones
// it serves.
func logRings(t *testing.T, when string, rs []*nsReplica) {
	t.Helper()
	for _, r := range rs {
		ring, err := r.Ring(nil)
		if err != nil {
			t.Logf("%s: %s: %v", when, r.HTTP, err)
			continue
		}
		var ms []string
		for _, m := range ring.Members {
			ms = append(ms, fmt.Sprintf("%s(owner %t, down %t)", m.Name, m.Owner, m.Down))
		}
		t.Logf("%s: %s sees %v and serves %d zones", when, ring.Self, ms, len(ring.Served))
	}
}

// TestPartition cuts one of three replicas (replicationFactor 1, default
// gossip timing) off from the others under load, both ways and then one
// way, and heals each cut. No answer may ever be wrong or a false
// NXDOMAIN, and every question is answered within answerWithin: a
// replica that cannot hear an owner answers stale or SERVFAIL in time,
// never nothing. SERVFAIL is allowed only for questions sent between a
// cut and the convergence after its heal; within convergeWithin of each
// heal the rings list all three replicas and every replica answers every
// question right again. It logs in how many seconds of each cut clients
// got SERVFAIL or stale answers, for which zones and from which replica
// the SERVFAILs came, and how long convergence took. Needs root.
func TestPartition(t *testing.T) {
	lab := newNetLab(t)
	cluster, named := partitionCluster(t)
	rs := startPartitionReplicas(t, lab, cluster, 1)
	testutil.Eventually(t, 60*time.Second, func() error { return converged(rs, named) })
	victim := rs[1]
	peers := []string{rs[0].ip, rs[2].ip}
	if n := servedServiceZones(t, victim.Replica); n == 0 {
		t.Fatalf("the replica to cut off serves no service zone: the test would prove nothing")
	}
	testutil.Eventually(t, 60*time.Second, func() error { return servedOnce(rs) })
	for _, r := range rs {
		ring, _ := r.Ring(nil)
		t.Logf("%s serves %v", ring.Self, ring.Served)
	}

	var targets []string
	for _, r := range rs {
		targets = append(targets, r.Addr)
	}
	next := func(i int) loadQuestion {
		if i%3 == 2 { // asked once: no cache on the way can hide a failure
			return loadQuestion{name: fmt.Sprintf("miss%d.p%d.svc.cluster.local.", i, i%partitionNamespaces+1),
				qtype: dns.TypeA, want: "NXDOMAIN "}
		}
		return named[i%len(named)]
	}
	l := startKillLoad(targets, partitionRate, next)
	var phases []partitionPhase
	// settle waits until the zones held over from the last cut are dropped
	// (zones kept for cluster.handoffGrace after a handoff are answered in
	// place, and would hide a failure) and some answers more came in.
	settle := func() {
		testutil.Eventually(t, 60*time.Second, func() error { return servedOnce(rs) })
		if len(phases) > 0 {
			phases[len(phases)-1].settled = time.Since(l.start)
		}
		n := len(l.finishedSoFar())
		testutil.Eventually(t, 10*time.Second, func() error {
			if m := len(l.finishedSoFar()); m < n+300 {
				return fmt.Errorf("%d answers since the replicas settled", m-n)
			}
			return nil
		})
	}
	for _, inboundOnly := range []bool{false, true} {
		settle()
		ph := partitionPhase{inboundOnly: inboundOnly, cut: time.Since(l.start)}
		lab.cut(victim.ns, peers, inboundOnly)
		// The partition lasts partitionCut; the load runs meanwhile.
		time.Sleep(partitionCut / 2)
		logRings(t, ph.String()+", halfway", rs)
		time.Sleep(partitionCut / 2)
		lab.heal(victim.ns)
		ph.heal = time.Since(l.start)
		testutil.Eventually(t, 60*time.Second, func() error { return converged(rs, named) })
		ph.converged = time.Since(l.start)
		phases = append(phases, ph)
	}
	settle()
	rep := l.finish()
	t.Logf("cut off %s (%s); %s", victim.ns, victim.Addr, rep)
	for _, ph := range phases {
		ph.report(t, rep)
	}
	checkPartitionLoad(t, rep, phases)
}
