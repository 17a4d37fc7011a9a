package zone

import (
	"testing"

	"github.com/miekg/dns"
)

// Zones built at one serial share one SOA record; another serial, earlier
// or later, gets its own, with that serial.
func TestSOAIsSharedAtOneSerial(t *testing.T) {
	cfg := &Config{Domains: Domains{Cluster: []string{"cluster.local."}, Reverse: []string{"in-addr.arpa."}}, TTL: 5}
	cfg.Prepare()
	serialOf := func(rr []dns.RR) uint32 {
		t.Helper()
		if len(rr) != 1 {
			t.Fatalf("SOA = %v, want one record", rr)
		}
		return rr[0].(*dns.SOA).Serial
	}
	a, b := cfg.SOA("in-addr.arpa.", 100), cfg.SOA("in-addr.arpa.", 100)
	if &a[0] != &b[0] {
		t.Error("two zones at serial 100 got two SOA records")
	}
	for _, serial := range []uint32{101, 100, 101} {
		if got := serialOf(cfg.SOA("in-addr.arpa.", serial)); got != serial {
			t.Errorf("SOA at serial %d says %d", serial, got)
		}
	}
	soa := cfg.SOA("cluster.local.", 100)[0].(*dns.SOA)
	if soa.Hdr.Name != "cluster.local." || soa.Ns != "ns.dns.cluster.local." || soa.Mbox != "hostmaster.cluster.local." {
		t.Errorf("cluster.local. SOA = %v", soa)
	}
	// An origin that is not a configured zone is built each time.
	if got := serialOf(cfg.SOA("example.", 7)); got != 7 {
		t.Errorf("example. SOA serial %d, want 7", got)
	}
}
