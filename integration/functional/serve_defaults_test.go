package functional

import (
	"fmt"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// k3sHostsServer is a coredns-custom `.server` file as k3s and AKS
// document them, a whole server block: here for a LAN's zone, answered
// from a hosts block of its own.
const k3sHostsServer = `lan.test:53 {
    errors
    cache 30
    hosts {
        192.0.2.50 printer.lan.test
        192.0.2.51 nas.lan.test
        2001:db8::51 nas.lan.test
        ttl 20
    }
}
`

// k3sNodeHosts is the NodeHosts file k3s writes, with a wrong address for
// a name of the .server block's zone: only that block's hosts give the
// right one.
const k3sNodeHosts = "192.168.1.10 node-a\n192.168.1.11 node-b\n6.6.6.6 printer.lan.test\n"

// k3s's default Corefile (testdata/distributions/k3s.Corefile, its files
// under /etc/coredns moved to the test's folder) with a coredns-custom
// .server file that has its own hosts block, served by `shardns serve
// --corefile` and by CoreDNS: the .server block answers its zone from
// its hosts alone (a name without an entry is SERVFAIL, as the hosts
// plugin answers without fallthrough), the main block answers cluster
// names, NodeHosts names (capped by its cache, as CoreDNS's) and
// forwarded names, and the .server block's entries make no PTR of the
// main block's.
func TestServeK3sServerHostsBesideCoreDNS(t *testing.T) {
	cp := kubeapi.Shared(t)
	ip := mkRealWorldServices(t, cp.Client)
	upstream := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1")
	text := harness.ReadDistribution(t, "k3s")
	if n := strings.Count(text, "/etc/coredns/"); n != 3 {
		t.Fatalf("k3s's Corefile names /etc/coredns/ %d times, want 3 (NodeHosts and two imports):\n%s", n, text)
	}

	shardnsAt, corednsAt := besideCorefile{
		tmpl: harness.LoopbackCorefile(strings.ReplaceAll(text, "/etc/coredns/", "{{dir}}/")),
		vars: map[string]string{"kubeconfig": cp.Kubeconfig, "upstream": upstream.Addr},
		files: func(render func(string) string) map[string]string {
			return map[string]string{
				"NodeHosts":         k3sNodeHosts,
				"custom/lan.server": render(harness.LoopbackCorefile(k3sHostsServer)),
				"custom/README.md":  "matched by neither import\n",
			}
		},
		probe:   "web.realworld.svc.cluster.local.",
		convert: true,
	}.serve(t)
	shardns, coredns := shardnsAt["dns"], corednsAt["dns"]

	qs := append(realWorldQuestions(t, text, ip, false, false),
		harness.Question{Name: "printer.lan.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{fmtRR("printer.lan.test.", 20, "A", "192.0.2.50")}},
		harness.Question{Name: "nas.lan.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{fmtRR("nas.lan.test.", 20, "A", "192.0.2.51")}},
		harness.Question{Name: "nas.lan.test.", Qtype: dns.TypeAAAA, Rcode: dns.RcodeSuccess, Answer: []string{fmtRR("nas.lan.test.", 20, "AAAA", "2001:db8::51")}},
		harness.Question{Name: "printer.lan.test.", Qtype: dns.TypeAAAA, Rcode: dns.RcodeSuccess, Answer: nil},
		harness.Question{Name: "printer.lan.test.", Qtype: dns.TypeMX, Rcode: dns.RcodeSuccess, Answer: nil},
		harness.Question{Name: "missing.lan.test.", Qtype: dns.TypeA, Rcode: dns.RcodeServerFailure, Answer: nil},
		// The .server block's address has no PTR in the main block: its
		// reverse name goes upstream, whose zone has no such name.
		harness.Question{Name: harness.ReverseName("192.0.2.50"), Qtype: dns.TypePTR, Rcode: dns.RcodeNameError, Answer: nil},
	)
	harness.AskBoth(t, shardns, coredns, qs)
	alikeResponses(t, shardns, coredns, qs)

	// NodeHosts names: CoreDNS's cache, before hosts in its plugin
	// order, keeps hosts' answers too, so cache 30 caps NodeHosts' ttl 60.
	t.Run("NodeHosts", func(t *testing.T) {
		nodeHosts := []harness.Question{
			{Name: "node-a.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{fmtRR("node-a.", 30, "A", "192.168.1.10")}},
			{Name: "node-b.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{fmtRR("node-b.", 30, "A", "192.168.1.11")}},
			{Name: "node-b.", Qtype: dns.TypeAAAA, Rcode: dns.RcodeSuccess, Answer: nil},
		}
		harness.AnswersAre(t, coredns, nodeHosts...)
		alikeResponses(t, shardns, coredns, nodeHosts)
	})
}

// kubesprayBig is a name whose TXT records (20 of about 50 bytes) do not
// fit a UDP answer of 512 bytes.
const kubesprayBig = "big.example.test."

// kubesprayBigTXT are kubesprayBig's TXT strings, one word each: Unbound's
// local data takes them unquoted.
func kubesprayBigTXT() []string {
	var out []string
	for i := range 20 {
		out = append(out, fmt.Sprintf("record-%02d-of-a-set-too-big-for-512-bytes", i))
	}
	return out
}

// Kubespray's default Corefile (testdata/distributions/kubespray.Corefile:
// forward with prefer_udp and max_concurrent, health with lameduck),
// served by `shardns serve --corefile` and by CoreDNS: the same answers
// for cluster names and forwarded names, and for a forwarded answer too
// big for UDP (prefer_udp asks the upstream over UDP, for TCP clients
// too, and again over TCP when the answer comes back truncated): TC
// over UDP, every record over TCP.
func TestServeKubesprayCorefileBesideCoreDNS(t *testing.T) {
	cp := kubeapi.Shared(t)
	ip := mkRealWorldServices(t, cp.Client)
	data := []string{"www.example.test. 300 IN A 192.0.2.1"}
	var bigAnswer []string
	for _, txt := range kubesprayBigTXT() {
		data = append(data, kubesprayBig+" 300 IN TXT "+txt)
		bigAnswer = append(bigAnswer, fmtRR(kubesprayBig, 30, "TXT", `"`+txt+`"`))
	}
	upstream := harness.StartUnbound(t, data...)
	text := harness.ReadDistribution(t, "kubespray")
	if !strings.Contains(text, "prefer_udp") {
		t.Fatalf("kubespray's Corefile has no prefer_udp:\n%s", text)
	}
	shardnsAt, corednsAt := besideCorefile{
		tmpl:    harness.LoopbackCorefile(text),
		vars:    map[string]string{"kubeconfig": cp.Kubeconfig, "upstream": upstream.Addr},
		probe:   "web.realworld.svc.cluster.local.",
		convert: true,
	}.serve(t)
	shardns, coredns := shardnsAt["dns"], corednsAt["dns"]

	qs := realWorldQuestions(t, text, ip, false, false)
	harness.AskBoth(t, shardns, coredns, qs)
	alikeResponses(t, shardns, coredns, qs)

	big := harness.Question{Name: kubesprayBig, Qtype: dns.TypeTXT, Rcode: dns.RcodeSuccess, Answer: bigAnswer}
	harness.AskBothWith(t, shardns, coredns, func(addr, proto string) error {
		if proto == "tcp" {
			return harness.AnswerMatches(addr, proto, big)
		}
		return truncated(addr, big)
	})
	alikeResponses(t, shardns, coredns, []harness.Question{big})
}

// truncated checks that addr answers q over UDP, without EDNS0, with TC
// set and q's rcode.
func truncated(addr string, q harness.Question) error {
	r, err := testutil.Exchange(addr, "udp", q.Name, q.Qtype)
	if err != nil {
		return err
	}
	if !r.Truncated || r.Rcode != q.Rcode {
		return fmt.Errorf("%s %s from %s over udp: %s tc=%v, want %s tc=true", q.Name, dns.TypeToString[q.Qtype], addr,
			dns.RcodeToString[r.Rcode], r.Truncated, dns.RcodeToString[q.Rcode])
	}
	return nil
}
