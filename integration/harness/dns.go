package harness

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

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

// PointsTo checks that the ReverseName name of ip answers name alone.
func PointsTo(addr, ip, name string) error {
	rev, err := dns.ReverseAddr(ip)
	if err != nil {
		return err
	}
	r, err := testutil.Exchange(addr, "udp", rev, dns.TypePTR)
	if err != nil {
		return err
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.PTR).Ptr != name {
		return fmt.Errorf("PTR %s from %s: %s %v, want %s", rev, addr, dns.RcodeToString[r.Rcode], r.Answer, name)
	}
	return nil
}

// NXDomain checks that addr answers name (A, over UDP) with NXDOMAIN.
func NXDomain(addr, name string) error {
	r, err := testutil.Exchange(addr, "udp", name, dns.TypeA)
	if err != nil {
		return err
	}
	if r.Rcode != dns.RcodeNameError {
		return fmt.Errorf("%s from %s: %s, want NXDOMAIN", name, addr, dns.RcodeToString[r.Rcode])
	}
	return nil
}

// AnswerCase is a question and the answer CheckAnswer expects.
type AnswerCase struct {
	Name   string
	Qtype  uint16
	Rcode  int
	Answer []string
}

// CheckAnswer asks addr c over proto and fails t unless the answer is c's.
func CheckAnswer(t testing.TB, addr, proto string, c AnswerCase) {
	t.Helper()
	want := make([]dns.RR, len(c.Answer))
	for i, s := range c.Answer {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = rr
	}
	// A client retries once, as resolvers do.
	var last error
	for attempt := 0; attempt < 2; attempt++ {
		if last = ExchangeMatches(addr, proto, c, want); last == nil {
			return
		}
	}
	t.Fatal(last)
}

// AnswerSummary is what the comparison looks at in an answer.
func AnswerSummary(addr, name string, qtype uint16) (string, error) {
	r, err := testutil.Exchange(addr, "udp", name, qtype)
	if err != nil {
		return "", err
	}
	var answer, authority []string
	for _, rr := range r.Answer {
		rr.Header().Ttl = 0
		answer = append(answer, rr.String())
	}
	for _, rr := range r.Ns {
		authority = append(authority, dns.TypeToString[rr.Header().Rrtype])
	}
	slices.Sort(answer)
	slices.Sort(authority)
	return fmt.Sprintf("%s aa=%t tc=%t answer=%q authority=%v",
		dns.RcodeToString[r.Rcode], r.Authoritative, r.Truncated, answer, authority), nil
}

// ExchangeMatches asks addr c over proto and compares the rcode with c's
// and the answer records with want.
func ExchangeMatches(addr, proto string, c AnswerCase, want []dns.RR) error {
	r, err := testutil.Exchange(addr, proto, c.Name, c.Qtype)
	if err != nil {
		return err
	}
	if r.Rcode != c.Rcode {
		return fmt.Errorf("%s over %s: rcode %s, want %s", c.Name, proto, dns.RcodeToString[r.Rcode], dns.RcodeToString[c.Rcode])
	}
	if got, exp := testutil.Records(r.Answer), testutil.Records(want); !slices.Equal(got, exp) {
		return fmt.Errorf("%s over %s: %v, want %v", c.Name, proto, got, exp)
	}
	return nil
}

// AnswerText is the RCODE and the sorted answer records without owner
// name and TTL, e.g. "NOERROR A 10.244.3.20 A 10.244.3.21".
func AnswerText(r *dns.Msg) string {
	rrs := make([]string, len(r.Answer))
	for i, rr := range r.Answer {
		h := rr.Header()
		rrs[i] = dns.TypeToString[h.Rrtype] + " " + strings.TrimPrefix(rr.String(), h.String())
	}
	sort.Strings(rrs)
	return strings.Join(append([]string{dns.RcodeToString[r.Rcode]}, rrs...), " ")
}

// ExchangeDoH asks name's A by DNS over HTTPS (POST) on a new connection
// from the address from.
func ExchangeDoH(addr, from, name string, pool *x509.CertPool) (*dns.Msg, error) {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		TLSClientConfig:   &tls.Config{RootCAs: pool, ServerName: "localhost"},
		DialContext:       (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}).DialContext,
	}}
	defer client.CloseIdleConnections()
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	q, err := m.Pack()
	if err != nil {
		return nil, err
	}
	resp, err := client.Post("https://"+addr+"/dns-query", "application/dns-message", bytes.NewReader(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	r := new(dns.Msg)
	return r, r.Unpack(body)
}
