package functional

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
)

// k8sExternalTransferCorefile is CoreDNS 1.15's k8s_external README
// example with transfer, on loopback ports.
const k8sExternalTransferCorefile = `.:{{dns}} {
    bind 127.0.0.1
    transfer example.org {
        to *
    }
    kubernetes cluster.local {
        kubeconfig {{kubeconfig}} kubeapi
    }
    k8s_external example.org
}
`

// An AXFR of the external zone from `shardns serve --corefile` holds the
// records CoreDNS 1.15 transfers from the same Corefile. Compared: the
// first and last records (the SOA, its serial zeroed since each server
// counts its own, equal to each other within each transfer), and the
// records between as a multiset, sorted: CoreDNS walks the Services in
// its informer's order and repeats an address once per port. The NS's
// own address is the one difference, checked apart.
func TestK8sExternalTransferBesideCoreDNS(t *testing.T) {
	cp := kubeapi.Shared(t)
	mkExternalServices(t, cp.Client, "k8sextxfr")
	vars := map[string]string{"kubeconfig": cp.Kubeconfig}
	shardns := serveCorefileText(t, harness.RenderCorefile(t, k8sExternalTransferCorefile, vars).Text)
	coreRun := harness.RenderCorefile(t, k8sExternalTransferCorefile, vars)
	coredns := harness.StartCoreDNS(t, harness.CoreDNSOptions{Corefile: coreRun.Text, Addr: coreRun.Addrs["dns"], Probe: "web.k8sextxfr.example.org."})
	want, err := transferText(coredns)
	if err != nil {
		t.Fatal(err)
	}
	got, err := transferText(shardns)
	if err != nil {
		t.Fatal(err)
	}
	// The NS's address: CoreDNS run outside a cluster finds no Service
	// of its own and sends none; shardns sends the address it listens
	// on, as it answers ns1.dns.example.org. The rest is compared.
	nsAddr := "ns1.dns.example.org.\t5\tIN\tA\t127.0.0.1"
	if !slices.Contains(got, nsAddr) {
		t.Errorf("shardns's transfer lacks its NS's address %s", nsAddr)
	}
	got = slices.DeleteFunc(got, func(rr string) bool { return rr == nsAddr })
	for _, rr := range []string{"web.k8sextxfr.example.org.\t5\tIN\tA\t192.0.2.10",
		"_https._tcp.web.k8sextxfr.example.org.\t5\tIN\tSRV\t0 100 443 web.k8sextxfr.example.org."} {
		if !slices.Contains(got, rr) {
			t.Errorf("shardns's transfer lacks %s", rr)
		}
	}
	// Services with load balancer ingress hostnames (other tests' on the
	// shared apiserver) are transferred by CoreDNS as CNAMEs and SRVs to
	// the hostnames, each repeated per port in its informer's order;
	// shardns leaves them out of transfers (docs/configuration.md,
	// "External names"). The rest must be the same.
	want = slices.DeleteFunc(want, fromIngressHostname)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("shardns transfers\n%s\nCoreDNS\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// UDP is refused, as CoreDNS refuses it.
	for _, addr := range []string{shardns, coredns} {
		m := new(dns.Msg)
		m.SetQuestion("example.org.", dns.TypeAXFR)
		r, err := dns.Exchange(m, addr)
		if err != nil || r.Rcode != dns.RcodeRefused {
			t.Errorf("AXFR over UDP from %s: %v %v, want REFUSED", addr, r, err)
		}
	}
}

// fromIngressHostname tells a transferred record made from a load
// balancer ingress hostname: a CNAME, or an SRV whose target is outside
// the external zone.
func fromIngressHostname(rr string) bool {
	f := strings.Split(rr, "\t")
	if len(f) < 5 {
		return false
	}
	switch f[3] {
	case "CNAME":
		return true
	case "SRV":
		target := f[4][strings.LastIndexByte(f[4], ' ')+1:]
		return !dns.IsSubDomain("example.org.", target)
	}
	return false
}

// transferText is the AXFR of example.org from addr as text: the SOA
// (serial zeroed), the records between in sorted order, the SOA again.
// It fails unless the transfer begins and ends with the same SOA.
func transferText(addr string) ([]string, error) {
	m := new(dns.Msg)
	m.SetQuestion("example.org.", dns.TypeAXFR)
	ch, err := new(dns.Transfer).In(m, addr)
	if err != nil {
		return nil, err
	}
	var rrs []dns.RR
	for env := range ch {
		if env.Error != nil {
			return nil, fmt.Errorf("AXFR from %s: %w", addr, env.Error)
		}
		rrs = append(rrs, env.RR...)
	}
	if len(rrs) < 2 {
		return nil, fmt.Errorf("AXFR from %s: %d records", addr, len(rrs))
	}
	first, ok1 := rrs[0].(*dns.SOA)
	last, ok2 := rrs[len(rrs)-1].(*dns.SOA)
	if !ok1 || !ok2 || first.String() != last.String() {
		return nil, fmt.Errorf("AXFR from %s does not begin and end with its SOA: %v … %v", addr, rrs[0], rrs[len(rrs)-1])
	}
	soa := dns.Copy(first).(*dns.SOA)
	soa.Serial = 0
	var body []string
	for _, rr := range rrs[1 : len(rrs)-1] {
		body = append(body, rr.String())
	}
	slices.Sort(body)
	return append(append([]string{soa.String()}, body...), soa.String()), nil
}

// sameExternalTransfers wants the same AXFR of example.org from every
// replica, one put together from namespaces each held by one replica:
// every namespace's address records are in it.
func sameExternalTransfers(t *testing.T, addrs []string, questions map[string][]harness.Question) {
	t.Helper()
	var first []string
	for i, addr := range addrs {
		got, err := transferText(addr)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = got
		} else if strings.Join(got, "\n") != strings.Join(first, "\n") {
			t.Fatalf("%s transfers\n%s\n%s transfers\n%s", addrs[0], strings.Join(first, "\n"), addr, strings.Join(got, "\n"))
		}
	}
	for ns, qs := range questions {
		web := qs[0] // web's A
		if !slices.Contains(first, web.Answer[0]) {
			t.Errorf("the transfer lacks %s's %s", ns, web.Answer[0])
		}
	}
}
