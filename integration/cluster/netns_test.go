package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// A network of its own for replicas: one namespace per replica, each with
// an eth0 on a bridge, so that the traffic between two replicas can be cut
// in one namespace's firewall while the test, from the host, still reaches
// every replica. The bridge lives in a namespace of its own too: with
// br_netfilter loaded (Docker loads it), bridged frames pass the iptables
// FORWARD chain of the bridge's namespace, whose policy Docker sets to DROP
// on the host; the bridge's own namespace has no rules.

// netLab is the namespaces, bridge and links of one test run.
type netLab struct {
	t      *testing.T
	tok    string // unique per run: in every name the host sees
	hub    string // the namespace holding the bridge
	prefix string // "10.250.N.": the /24 of this run
	host   string // the host's address on the bridge
}

// newNetLab creates the hub namespace, its bridge and a link to the host,
// on a /24 of 10.250.0.0/16 that no interface of the host uses. It skips
// the test when it cannot: not root, or no `ip netns`. Everything is
// removed at test end, failed or not.
func newNetLab(t *testing.T) *netLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("partition tests need root: they create network namespaces (run as root, as CI does)")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("partition tests need %s (iproute2, nftables): %v", tool, err)
		}
	}
	b := make([]byte, 3)
	rand.Read(b)
	tok := hex.EncodeToString(b)
	addrs, _ := exec.Command("ip", "-4", "-o", "addr").Output()
	third := 0
	for n := int(b[0])%250 + 1; third == 0; n = n%250 + 1 {
		if !strings.Contains(string(addrs), fmt.Sprintf(" 10.250.%d.", n)) {
			third = n
		}
	}
	l := &netLab{t: t, tok: tok, hub: "sdp" + tok + "hub", prefix: fmt.Sprintf("10.250.%d.", third)}
	l.host = l.prefix + "254"
	if out, err := exec.Command("ip", "netns", "add", l.hub).CombinedOutput(); err != nil {
		t.Skipf("partition tests need `ip netns`: ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", "sdp"+tok).Run() // gone with the hub already, normally
		exec.Command("ip", "netns", "del", l.hub).Run()
	})
	l.run("ip", "-n", l.hub, "link", "set", "lo", "up")
	l.run("ip", "-n", l.hub, "link", "add", "br0", "type", "bridge")
	l.run("ip", "-n", l.hub, "link", "set", "br0", "up")
	l.run("ip", "link", "add", "sdp"+tok, "type", "veth", "peer", "name", "up0", "netns", l.hub)
	l.run("ip", "-n", l.hub, "link", "set", "up0", "master", "br0", "up")
	l.run("ip", "addr", "add", l.host+"/24", "dev", "sdp"+tok)
	l.run("ip", "link", "set", "sdp"+tok, "up")
	return l
}

// run runs a command that must succeed.
func (l *netLab) run(name string, args ...string) {
	l.t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		l.t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// addNode creates namespace number i (1–250) with eth0 on the bridge at
// prefix+i and returns the namespace's name and address.
func (l *netLab) addNode(i int) (ns, addr string) {
	l.t.Helper()
	ns, addr = fmt.Sprintf("sdp%s%d", l.tok, i), fmt.Sprintf("%s%d", l.prefix, i)
	l.run("ip", "netns", "add", ns)
	l.t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	veth := fmt.Sprintf("n%d", i)
	l.run("ip", "-n", l.hub, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
	l.run("ip", "-n", l.hub, "link", "set", veth, "master", "br0", "up")
	l.run("ip", "-n", ns, "link", "set", "lo", "up")
	l.run("ip", "-n", ns, "addr", "add", addr+"/24", "dev", "eth0")
	l.run("ip", "-n", ns, "link", "set", "eth0", "up")
	return ns, addr
}

// cut drops, in namespace ns, the packets it receives from peers and,
// unless inboundOnly, those it sends to them: a partition between ns and
// the peers that leaves its clients (the host) untouched.
func (l *netLab) cut(ns string, peers []string, inboundOnly bool) {
	l.t.Helper()
	set := strings.Join(peers, ", ")
	rules := fmt.Sprintf("table inet partition {\n chain in { type filter hook input priority 0; policy accept; ip saddr { %s } drop; }\n", set)
	if !inboundOnly {
		rules += fmt.Sprintf(" chain out { type filter hook output priority 0; policy accept; ip daddr { %s } drop; }\n", set)
	}
	rules += "}\n"
	cmd := exec.Command("ip", "netns", "exec", ns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		l.t.Fatalf("nft in %s: %v: %s\n%s", ns, err, out, rules)
	}
}

// heal removes the partition of ns.
func (l *netLab) heal(ns string) {
	l.t.Helper()
	l.run("ip", "netns", "exec", ns, "nft", "delete", "table", "inet", "partition")
}
