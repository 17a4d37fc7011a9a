package kubenode

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func TestSplitRule(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"-A FORWARD -s 10.244.0.0/24 -m comment --comment shardns-kubenode -j ACCEPT",
			[]string{"-A", "FORWARD", "-s", "10.244.0.0/24", "-m", "comment", "--comment", "shardns-kubenode", "-j", "ACCEPT"}},
		{`-A PREROUTING -m comment --comment "kubernetes service \"portals\"" -j KUBE-SERVICES`,
			[]string{"-A", "PREROUTING", "-m", "comment", "--comment", `kubernetes service "portals"`, "-j", "KUBE-SERVICES"}},
		{"-N KUBE-FIREWALL", []string{"-N", "KUBE-FIREWALL"}},
		{"", nil},
	} {
		if got := splitRule(tc.line); !slices.Equal(got, tc.want) {
			t.Errorf("splitRule(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

func TestNormalize(t *testing.T) {
	for ref, want := range map[string]string{
		"shardns:latest":           "docker.io/library/shardns:latest",
		"library/busybox:1":        "docker.io/library/busybox:1",
		"shardns.test/pause:1":     "shardns.test/pause:1",
		"localhost/x:1":            "localhost/x:1",
		"registry:5000/a/b:c":      "registry:5000/a/b:c",
		"docker.io/library/x:1":    "docker.io/library/x:1",
		"shardns.test/shardns-1:t": "shardns.test/shardns-1:t",
	} {
		if got := normalize(ref); got != want {
			t.Errorf("normalize(%q) = %q, want %q", ref, got, want)
		}
	}
}

func TestHexIPv4(t *testing.T) {
	// /proc/net/route writes addresses little-endian: 0x0000F40A is 10.244.0.0.
	got, err := hexIPv4("0000F40A")
	if err != nil || got != netip.MustParseAddr("10.244.0.0") {
		t.Errorf("hexIPv4(0000F40A) = %v, %v; want 10.244.0.0", got, err)
	}
	if _, err := hexIPv4("zz"); err == nil {
		t.Error("hexIPv4(zz): want an error")
	}
}

// The node's resolver knows one external name and nothing else, as the
// tests that forward to it expect.
func TestUpstreamAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		qtype  uint16
		rcode  int
		answer string
	}{
		{ExternalName + ".", dns.TypeA, dns.RcodeSuccess, "A " + ExternalIPv4},
		{"EXTERNAL.shardns.test.", dns.TypeAAAA, dns.RcodeSuccess, "AAAA " + ExternalIPv6},
		{ExternalName + ".", dns.TypeTXT, dns.RcodeSuccess, `TXT "` + ExternalTXT + `"`},
		{ExternalName + ".", dns.TypeMX, dns.RcodeSuccess, ""},
		{"nosuchname.", dns.TypeA, dns.RcodeNameError, ""},
		{ExternalName + ".nl0.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, ""},
	} {
		q := new(dns.Msg)
		q.SetQuestion(tc.name, tc.qtype)
		m := upstreamAnswer(q)
		var answer []string
		for _, rr := range m.Answer {
			answer = append(answer, dns.TypeToString[rr.Header().Rrtype]+" "+rr.String()[len(rr.Header().String()):])
		}
		if m.Rcode != tc.rcode || strings.Join(answer, "\n") != tc.answer || m.Id != q.Id {
			t.Errorf("%s %s: %s %q (id %d), want %s %q (id %d)", tc.name, dns.TypeToString[tc.qtype],
				dns.RcodeToString[m.Rcode], answer, m.Id, dns.RcodeToString[tc.rcode], tc.answer, q.Id)
		}
		if tc.answer == "" && (len(m.Ns) != 1 || m.Ns[0].Header().Rrtype != dns.TypeSOA) {
			t.Errorf("%s %s: authority %v, want the root's SOA for negative caching", tc.name, dns.TypeToString[tc.qtype], m.Ns)
		}
	}
}
