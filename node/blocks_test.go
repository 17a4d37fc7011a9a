package node

import (
	"fmt"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/internal/testutil"
)

// Server blocks on one address answer their names through their own
// chains, as CoreDNS's server blocks do: a block's hosts answer only its
// names, and a block without the kubernetes plugin answers a cluster
// name from its own chain, not from the cluster.
func TestServerBlocksHaveTheirOwnChains(t *testing.T) {
	port, err := testutil.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	text := strings.Replace(demoConfig, `dns: {listen: ["127.0.0.1:0"]}`, fmt.Sprintf(`dns: {listen: [%q]}`, addr), 1) +
		`hosts: {entries: ["192.0.2.1 www.example.net"], fallthrough: ["."]}
servers:
- listen: ["` + addr + `"]
  zones: [example.org]
  chain: {hosts: {entries: ["192.0.2.7 www.example.org"]}}
- listen: ["` + addr + `"]
  zones: [data.svc.cluster.local]
  chain: {kubernetes: false, hosts: {entries: ["192.0.2.9 redis.data.svc.cluster.local"], fallthrough: ["."]}}
`
	startDemoNode(t, text, false)
	for _, c := range []struct {
		name  string
		rcode int
		want  string // the A record's address; "" for none
	}{
		{"www.example.org.", dns.RcodeSuccess, "192.0.2.7"},                   // the example.org block's hosts
		{"www.example.net.", dns.RcodeSuccess, "192.0.2.1"},                   // the root block's hosts
		{"frontend.shop.svc.cluster.local.", dns.RcodeSuccess, "10.96.10.10"}, // the root block's cluster
		{"redis.data.svc.cluster.local.", dns.RcodeSuccess, "192.0.2.9"},      // hosts, not the cluster's 10.96.20.10
		{"postgres.data.svc.cluster.local.", dns.RcodeRefused, ""},            // no cluster, no upstream in that block
		{"www2.example.org.", dns.RcodeServerFailure, ""},                     // that block's hosts have no fallthrough
	} {
		r, err := testutil.Exchange(addr, "udp", c.name, dns.TypeA)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, rr := range r.Answer {
			if a, ok := rr.(*dns.A); ok {
				got = a.A.String()
			}
		}
		if r.Rcode != c.rcode || got != c.want {
			t.Errorf("%s: %s %q, want %s %q", c.name, dns.RcodeToString[r.Rcode], got, dns.RcodeToString[c.rcode], c.want)
		}
	}
}

// Beside cluster names under the root (a "." block's kubernetes plugin),
// a block with the file plugin and without kubernetes answers its zone
// file, as CoreDNS asks the block of the longest zone first.
func TestRootClusterBesideAFileBlock(t *testing.T) {
	port, err := testutil.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	text := strings.Replace(demoConfig, `dns: {listen: ["127.0.0.1:0"]}`, fmt.Sprintf(`dns: {listen: [%q]}`, addr), 1)
	text = strings.Replace(text, "kubernetes: {enabled: false}", "kubernetes: {enabled: false, zones: [.], reverseZones: [], fallthrough: []}", 1) +
		`files: {zones: [{file: db.example.io, origin: example.io}]}
servers:
- listen: ["` + addr + `"]
  zones: [example.io]
  chain: {kubernetes: false}
`
	startDemoNodeFiles(t, text, false, map[string]string{"db.example.io": "$ORIGIN example.io.\n@ 300 IN SOA ns.example.io. admin.example.io. 1 7200 3600 1209600 300\n@ 300 IN NS ns.example.io.\nwww 300 IN A 192.0.2.80\n"})
	for _, c := range []struct {
		name string
		want string
	}{
		{"www.example.io.", "192.0.2.80"},     // the file block
		{"frontend.shop.svc.", "10.96.10.10"}, // cluster names under the root
	} {
		r, err := testutil.Exchange(addr, "udp", c.name, dns.TypeA)
		if err != nil {
			t.Fatal(err)
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != c.want {
			t.Errorf("%s: %s %v, want %s", c.name, dns.RcodeToString[r.Rcode], r.Answer, c.want)
		}
	}
}
