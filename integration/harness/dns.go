package harness

import (
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"github.com/shardns/shardns/internal/testutil"
)

// Dig runs Debian's Dig against addr and returns its +short lines, sorted.
func Dig(t testing.TB, addr string, args ...string) []string {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	full := append([]string{"@" + host, "-p", port, "+short", "+tries=1", "+time=2"}, args...)
	out, err := exec.Command("dig", full...).CombinedOutput()
	if err != nil {
		t.Fatalf("dig %v: %v\n%s", full, err, out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && !strings.HasPrefix(l, ";;") {
			lines = append(lines, l)
		}
	}
	slices.Sort(lines)
	return lines
}

// DigStatus runs Dig and returns the status of the header line.
func DigStatus(t testing.TB, addr string, args ...string) string {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	full := append([]string{"@" + host, "-p", port, "+tries=1", "+time=2"}, args...)
	out, err := exec.Command("dig", full...).CombinedOutput()
	if err != nil {
		t.Fatalf("dig %v: %v\n%s", full, err, out)
	}
	m := regexp.MustCompile(`status: (\w+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no status in dig output:\n%s", out)
	}
	return string(m[1])
}

// AnswerIs checks that addr answers the A question name with ip alone.
func AnswerIs(addr, name, ip string) error {
	r, err := testutil.Exchange(addr, "udp", name, dns.TypeA)
	if err != nil {
		return err
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != ip {
		return fmt.Errorf("%s from %s: %s %v", name, addr, dns.RcodeToString[r.Rcode], r.Answer)
	}
	return nil
}

// Ask asks addr over proto ("udp", "tcp") and fails t without a response.
func Ask(t testing.TB, addr, proto, name string, qtype uint16) *dns.Msg {
	t.Helper()
	r, err := testutil.Exchange(addr, proto, name, qtype)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// RDataValues renders the answer section as sorted rdata strings ("10.96.0.5",
// "0 100 80 web.ns.svc.cluster.local.", ...).
func RDataValues(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		s := rr.String()
		hdr := rr.Header().String()
		out = append(out, strings.TrimSpace(strings.TrimPrefix(s, hdr)))
	}
	slices.Sort(out)
	return out
}

// ReverseName is the in-addr.arpa or ip6.arpa name of ip.
func ReverseName(ip string) string {
	r, err := dns.ReverseAddr(ip)
	if err != nil {
		panic(err)
	}
	return r
}
