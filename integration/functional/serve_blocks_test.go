package functional

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
)

// manualZoneAddr is the last octet of www's address in each zone file
// of the manual's example: a question routed to the wrong block gets
// another zone's address, or none.
var manualZoneAddr = map[string]int{"coredns.io": 81, "example.io": 82, "example.net": 83}

// manualZone is the zone file db.<zone> of the manual's example. The
// SOA's TTL is above its minimum, so negative answers show the
// documented difference of their SOA's TTL.
func manualZone(zone string) string {
	return fmt.Sprintf(`$ORIGIN %[1]s.
@     3600 IN SOA   ns1.%[1]s. hostmaster.%[1]s. 2024010101 7200 3600 1209600 300
@     3600 IN NS    ns1.%[1]s.
ns1   3600 IN A     192.0.2.53
www   3600 IN A     192.0.2.%[2]d
www   3600 IN AAAA  2001:db8::%[2]d
mail  3600 IN MX    10 www.%[1]s.
alias 3600 IN CNAME www.%[1]s.
`, zone, manualZoneAddr[zone])
}

// manualCorefile is CoreDNS's manual's server blocks example
// (corefile/testdata/coredns-manual-zones.Corefile: four zones on two
// ports, proxy written as forward) on loopback ports: port 5300 and 53
// become free ports ({{alt}}, {{dns}}), kubernetes reaches the test's
// API server by a kubeconfig, forward the test's Unbound. Nothing else
// changes: each replacement must take place once.
func manualCorefile(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile("../../corefile/testdata/coredns-manual-zones.Corefile")
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	for _, r := range [][2]string{
		{"coredns.io:5300 {\n", "coredns.io:{{alt}} {\n    bind 127.0.0.1\n"},
		{"    kubernetes\n", "    kubernetes {\n        kubeconfig {{kubeconfig}}\n    }\n"},
		{"forward . 8.8.8.8\n", "forward . {{upstream}}\n"},
	} {
		if strings.Count(text, r[0]) != 1 {
			t.Fatalf("the manual's Corefile has %d lines %q, want 1:\n%s", strings.Count(text, r[0]), r[0], text)
		}
		text = strings.Replace(text, r[0], r[1], 1)
	}
	return harness.LoopbackCorefile(text)
}

// CoreDNS's manual's example of server blocks, served by `shardns serve
// --corefile` and by CoreDNS: each block answers through its own chain.
// On the port of example.io, example.net and the root, a question goes
// to the block of the longest zone: the two zone files, and the root's
// kubernetes plugin, whose zone is the root (cluster names are
// web.ns.svc.; it answers NXDOMAIN for every other name, so its forward
// is reached by none asked here); the other port serves coredns.io only.
// Every section, flag and TTL must be CoreDNS's, except the documented
// TTL of a file zone's SOA in negative answers.
func TestServeManualServerBlocksBesideCoreDNS(t *testing.T) {
	cp := kubeapi.Shared(t)
	ip := mkRealWorldServices(t, cp.Client)
	upstream := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1", "www.coredns.io. 300 IN A 6.6.6.6",
		"1.2.0.192.in-addr.arpa. 300 IN PTR printer.example.test.")

	zoneFiles := map[string]string{}
	for zone := range manualZoneAddr {
		zoneFiles["db."+zone] = manualZone(zone)
	}
	shardnsAt, corednsAt := besideCorefile{
		tmpl:    manualCorefile(t),
		vars:    map[string]string{"kubeconfig": cp.Kubeconfig, "upstream": upstream.Addr},
		files:   func(func(string) string) map[string]string { return zoneFiles },
		probe:   "www.example.io.",
		convert: true,
	}.serve(t)
	shardns, shardnsAlt := shardnsAt["dns"], shardnsAt["alt"]
	coredns, corednsAlt := corednsAt["dns"], corednsAt["alt"]

	onMain := append(manualZoneQuestions("example.io"), manualZoneQuestions("example.net")...)
	web, db := "web.realworld.svc.", "db.realworld.svc."
	onMain = append(onMain,
		harness.Question{Name: web, Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{fmtRR(web, 5, "A", ip)}},
		harness.Question{Name: db, Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{fmtRR(db, 5, "A", "10.244.8.10"), fmtRR(db, 5, "A", "10.244.8.11")}},
		harness.Question{Name: "_http._tcp." + web, Qtype: dns.TypeSRV, Rcode: dns.RcodeSuccess, Answer: []string{fmtRR("_http._tcp."+web, 5, "SRV", "0 100 80 "+web)}},
		harness.Question{Name: "nope.realworld.svc.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
		harness.Question{Name: "web.realworld.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
		// Names of no block but the root's: the kubernetes plugin of
		// the root zone denies them before forward, even where the
		// upstream has them.
		harness.Question{Name: "www.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
		harness.Question{Name: "www.coredns.io.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
		// A reverse name too, though the upstream has its PTR. (A
		// Service's reverse name gets no answer from CoreDNS 1.15: its
		// PTR target, web.realworld.svc.. with the root zone appended,
		// does not pack, and nothing is sent.)
		harness.Question{Name: "1.2.0.192.in-addr.arpa.", Qtype: dns.TypePTR, Rcode: dns.RcodeNameError, Answer: nil},
	)
	harness.AskBoth(t, shardns, coredns, onMain)
	alikeResponses(t, shardns, coredns, onMain, negativeSOATTL)

	onAlt := append(manualZoneQuestions("coredns.io"),
		harness.Question{Name: "www.example.io.", Qtype: dns.TypeA, Rcode: dns.RcodeRefused, Answer: nil},
		harness.Question{Name: web, Qtype: dns.TypeA, Rcode: dns.RcodeRefused, Answer: nil},
		harness.Question{Name: "www.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeRefused, Answer: nil},
	)
	harness.AskBoth(t, shardnsAlt, corednsAlt, onAlt)
	alikeResponses(t, shardnsAlt, corednsAlt, onAlt, negativeSOATTL)
}

// manualZoneQuestions are the questions for the zone file of zone and
// the answer records its file gives.
func manualZoneQuestions(zone string) []harness.Question {
	www, apex := "www."+zone+".", zone+"."
	addr := fmt.Sprintf("192.0.2.%d", manualZoneAddr[zone])
	return []harness.Question{
		{Name: www, Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{fmtRR(www, 3600, "A", addr)}},
		{Name: www, Qtype: dns.TypeAAAA, Rcode: dns.RcodeSuccess, Answer: []string{fmtRR(www, 3600, "AAAA", fmt.Sprintf("2001:db8::%d", manualZoneAddr[zone]))}},
		{Name: "mail." + apex, Qtype: dns.TypeMX, Rcode: dns.RcodeSuccess, Answer: []string{fmtRR("mail."+apex, 3600, "MX", "10 "+www)}},
		{Name: "alias." + apex, Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{fmtRR("alias."+apex, 3600, "CNAME", www), fmtRR(www, 3600, "A", addr)}},
		{Name: apex, Qtype: dns.TypeNS, Rcode: dns.RcodeSuccess, Answer: []string{fmtRR(apex, 3600, "NS", "ns1."+apex)}},
		{Name: apex, Qtype: dns.TypeSOA, Rcode: dns.RcodeSuccess, Answer: []string{fmtRR(apex, 3600, "SOA", "ns1."+apex+" hostmaster."+apex+" 2024010101 7200 3600 1209600 300")}},
		{Name: www, Qtype: dns.TypeTXT, Rcode: dns.RcodeSuccess, Answer: nil},
		{Name: "nothere." + apex, Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
	}
}
