package zone

import (
	"github.com/miekg/dns"
	"strings"
	"testing"
)

// A transfer of example.org holds what CoreDNS's k8s_external streams:
// the SOA, NS and its address first, then per Service each address once
// per port and the first SRV of each owner name; nothing of Services
// without ports or external IPs.
func TestExternalTransfer(t *testing.T) {
	cfg := externalConfig(false)
	v := buildView(t, cfg, true, externalCluster())
	head := ExternalTransferHead(cfg, v.Directory(), eo)
	want := []string{
		"example.org.\t5\tIN\tSOA\tns1.dns.example.org. hostmaster.dns.example.org. 1 7200 1800 86400 5",
		"example.org.\t5\tIN\tNS\tns1.dns.example.org.",
		"ns1.dns.example.org.\t5\tIN\tA\t10.96.0.10",
	}
	if got := rrText(head); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("head:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	part := v.Zone(ServiceZoneKey("ns1", "cluster.local.")).ExternalTransferPart(cfg, eo, "ns1")
	want = []string{
		"lb.ns1.example.org.\t5\tIN\tA\t192.0.2.1",
		"lb.ns1.example.org.\t5\tIN\tSRV\t0 100 80 lb.ns1.example.org.",
		"_http._tcp.lb.ns1.example.org.\t5\tIN\tSRV\t0 100 80 lb.ns1.example.org.",
		"lb.ns1.example.org.\t5\tIN\tA\t192.0.2.1",
		"_https._tcp.lb.ns1.example.org.\t5\tIN\tSRV\t0 100 443 lb.ns1.example.org.",
		"lb.ns1.example.org.\t5\tIN\tAAAA\t2001:db8::1",
		"lb.ns1.example.org.\t5\tIN\tAAAA\t2001:db8::1",
		"lb.ns1.example.org.\t5\tIN\tA\t198.51.100.7",
		"lb.ns1.example.org.\t5\tIN\tA\t198.51.100.7",
		"lb.ns1.example.org.\t5\tIN\tA\t192.0.2.1",
		"lb.ns1.example.org.\t5\tIN\tA\t192.0.2.1",
	}
	if got := rrText(part); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("ns1's part:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func rrText(rrs []dns.RR) []string {
	out := make([]string, len(rrs))
	for i, rr := range rrs {
		out[i] = rr.String()
	}
	return out
}
