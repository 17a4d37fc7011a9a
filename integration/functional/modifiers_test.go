package functional

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// The tests here serve the README examples of CoreDNS's bufsize, nsid,
// header, dns64 and timeouts plugins with CoreDNS 1.15 and with `shardns
// serve --corefile`, side by side, and ask both the same questions: each
// answer must be the same in every part a client reads (rcode, flags,
// every section with TTLs, the OPT record's buffer size, DO bit and
// options).

// modifiersZone is the zone file the Corefiles serve: a name with many
// addresses for truncation, IPv4-only and dual-stack names for DNS64.
const modifiersZone = `$ORIGIN example.org.
@        3600 IN SOA sns.dns.icann.org. noc.dns.icann.org. 2017042745 7200 3600 1209600 1800
@        3600 IN NS  a.iana-servers.net.
www      3600 IN A   127.0.0.1
v4only    300 IN A   192.0.2.33
dual      300 IN A   192.0.2.34
dual      300 IN AAAA 2001:db8::34
alias     300 IN CNAME v4only
`

// writeModifiersZone writes modifiersZone, with 120 addresses for
// big.example.org, and returns its path.
func writeModifiersZone(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(modifiersZone)
	for i := range 120 {
		fmt.Fprintf(&b, "big 60 IN A 10.0.%d.%d\n", i/200, i%200+1)
	}
	path := filepath.Join(t.TempDir(), "db.example.org")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// modQuestion is a question as a client sends it, and the rcode and
// answer section it must get.
type modQuestion struct {
	name   string
	qtype  uint16
	udp    uint16 // EDNS0 buffer offered; 0: no OPT record
	nsid   bool   // ask for NSID
	noRD   bool   // clear RD
	rcode  int
	answer []string // zone-file lines; nil: not checked beyond the comparison
}

func (q modQuestion) msg() *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(q.name, q.qtype)
	m.RecursionDesired = !q.noRD
	if q.udp > 0 {
		m.SetEdns0(q.udp, false)
		if q.nsid {
			opt := m.IsEdns0()
			opt.Option = append(opt.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})
		}
	}
	return m
}

func (q modQuestion) String() string {
	return fmt.Sprintf("%s %s (udp %d, nsid %v, rd %v)", q.name, dns.TypeToString[q.qtype], q.udp, q.nsid, !q.noRD)
}

// knownDifference rewrites CoreDNS's answer where shardns answers
// otherwise on purpose, in what the plugins compared do not change.
type knownDifference func(q modQuestion, r *dns.Msg)

var (
	// Without bufsize, shardns advertises the 4096 bytes it takes;
	// CoreDNS echoes the client's offer.
	echoedSize knownDifference = func(_ modQuestion, r *dns.Msg) {
		if opt := r.IsEdns0(); opt != nil {
			opt.SetUDPSize(4096)
		}
	}
	// In a negative answer from a zone file, shardns caps the SOA's TTL
	// at its minimum field (RFC 2308 section 3); CoreDNS's file plugin
	// sends the SOA's own TTL.
	negativeSOATTL knownDifference = func(_ modQuestion, r *dns.Msg) {
		for _, rr := range r.Ns {
			if soa, ok := rr.(*dns.SOA); ok && len(r.Answer) == 0 {
				soa.Hdr.Ttl = min(soa.Hdr.Ttl, soa.Minttl)
			}
		}
	}
	// CoreDNS's nsid adds its OPT record with the DO bit set when the
	// answer had none, whatever the query said; shardns copies nothing
	// the query did not ask for (RFC 3225: DO is the query's).
	nsidDO knownDifference = func(_ modQuestion, r *dns.Msg) {
		if opt := r.IsEdns0(); opt != nil {
			opt.SetDo(false)
		}
	}
)

// askAlike asks shardns and CoreDNS each question over UDP and TCP: the
// two responses must render the same, once the known differences are
// applied to CoreDNS's, with the rcode and answer the question wants.
func askAlike(t *testing.T, shardns, coredns string, qs []modQuestion, known ...knownDifference) {
	t.Helper()
	for _, q := range qs {
		for _, proto := range []string{"udp", "tcp"} {
			var got [2]string
			for i, addr := range []string{shardns, coredns} {
				r, err := testutil.ExchangeMsg(addr, proto, q.msg())
				if err != nil {
					t.Fatalf("%s over %s from %s: %v", q, proto, addr, err)
				}
				for _, k := range known {
					if i == 1 {
						k(q, r)
					}
				}
				got[i] = renderResponse(r)
				want := slices.Clone(q.answer)
				slices.Sort(want)
				if r.Rcode != q.rcode || (q.answer != nil && !slices.Equal(testutil.Records(r.Answer), want)) {
					t.Errorf("%s over %s from %s:\n%s\nwant %s with answer %q", q, proto, addr, got[i], dns.RcodeToString[q.rcode], want)
				}
			}
			if got[0] != got[1] {
				t.Errorf("%s over %s: shardns answers\n%s\nCoreDNS answers\n%s", q, proto, got[0], got[1])
			}
		}
	}
}

// renderResponse writes what a client reads of r, the ID aside: rcode,
// flags, each section's records (sorted), and the OPT record.
func renderResponse(r *dns.Msg) string {
	var b strings.Builder
	flags := []struct {
		name string
		on   bool
	}{{"qr", r.Response}, {"aa", r.Authoritative}, {"tc", r.Truncated}, {"rd", r.RecursionDesired},
		{"ra", r.RecursionAvailable}, {"ad", r.AuthenticatedData}, {"cd", r.CheckingDisabled}}
	fmt.Fprintf(&b, "rcode %s, flags", dns.RcodeToString[r.Rcode])
	for _, f := range flags {
		if f.on {
			b.WriteString(" " + f.name)
		}
	}
	for _, s := range []struct {
		name string
		rrs  []dns.RR
	}{{"answer", r.Answer}, {"authority", r.Ns}, {"additional", r.Extra}} {
		var lines []string
		for _, rr := range s.rrs {
			if rr.Header().Rrtype != dns.TypeOPT {
				lines = append(lines, rr.String())
			}
		}
		slices.Sort(lines)
		fmt.Fprintf(&b, "\n%s: %d records", s.name, len(lines))
		for _, l := range lines {
			b.WriteString("\n  " + l)
		}
	}
	if opt := r.IsEdns0(); opt != nil {
		fmt.Fprintf(&b, "\nOPT: udp %d, do %v, version %d", opt.UDPSize(), opt.Do(), opt.Version())
		for _, o := range opt.Option {
			fmt.Fprintf(&b, ", option %d %s", o.Option(), o.String())
		}
	} else {
		b.WriteString("\nno OPT")
	}
	return b.String()
}

// zoneCorefile serves the zone file {{db}}, with {{plugin}} in the block.
const zoneCorefile = `example.org:{{dns}} {
    bind 127.0.0.1
    {{plugin}}
    file {{db}}
}
`

// serveZoneBoth serves zoneCorefile with plugin from shardns and CoreDNS.
func serveZoneBoth(t *testing.T, plugin string) dotServers {
	t.Helper()
	return serveBoth(t, zoneCorefile, map[string]string{"plugin": plugin, "db": writeModifiersZone(t)}, "www.example.org.", dns.RcodeSuccess)
}

var bigAnswer = func() []string {
	var out []string
	for i := range 120 {
		out = append(out, fmt.Sprintf("big.example.org.\t60\tIN\tA\t10.0.%d.%d", i/200, i%200+1))
	}
	return out
}()

func TestModifiersBufsize(t *testing.T) {
	// bufsize's README: "as an authoritative nameserver".
	s := serveZoneBoth(t, "bufsize 1220")
	askAlike(t, s.shardns, s.coredns, []modQuestion{
		{name: "www.example.org.", qtype: dns.TypeA, udp: 4096, answer: []string{"www.example.org.\t3600\tIN\tA\t127.0.0.1"}},
		{name: "www.example.org.", qtype: dns.TypeA, udp: 1000, answer: []string{"www.example.org.\t3600\tIN\tA\t127.0.0.1"}},
		{name: "www.example.org.", qtype: dns.TypeA, answer: []string{"www.example.org.\t3600\tIN\tA\t127.0.0.1"}},
		// Truncated at 1220 bytes over UDP, whole over TCP.
		{name: "big.example.org.", qtype: dns.TypeA, udp: 4096},
		{name: "big.example.org.", qtype: dns.TypeA, udp: 1232},
		{name: "big.example.org.", qtype: dns.TypeA, udp: 512},
	})
	for _, size := range []uint16{4096, 1220, 800} {
		r, err := testutil.ExchangeMsg(s.shardns, "udp", modQuestion{name: "big.example.org.", qtype: dns.TypeA, udp: size}.msg())
		if err != nil {
			t.Fatal(err)
		}
		if want := min(size, 1220); r.IsEdns0().UDPSize() != want || !r.Truncated || len(r.Answer) >= len(bigAnswer) {
			t.Errorf("offering %d: %d addresses advertising %d, truncated %v; want some advertising %d, truncated",
				size, len(r.Answer), r.IsEdns0().UDPSize(), r.Truncated, want)
		}
	}
	r, err := testutil.ExchangeMsg(s.shardns, "tcp", modQuestion{name: "big.example.org.", qtype: dns.TypeA, udp: 4096}.msg())
	if err != nil || r.Truncated || len(r.Answer) != len(bigAnswer) {
		t.Errorf("over TCP: %v, want all %d addresses", err, len(bigAnswer))
	}

	// bufsize's README: "the buffer size of outgoing query to the
	// resolver": the forwarded question offers at most 1100 bytes.
	u := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1")
	f := serveBoth(t, forwardCorefile, map[string]string{"plugin": "bufsize 1100", "upstream": u.Addr}, "www.example.test.", dns.RcodeSuccess)
	askAlike(t, f.shardns, f.coredns, []modQuestion{
		{name: "www.example.test.", qtype: dns.TypeA, udp: 4096, rcode: dns.RcodeSuccess, answer: []string{"www.example.test.\t300\tIN\tA\t192.0.2.1"}},
		{name: "www.example.test.", qtype: dns.TypeA, udp: 600, rcode: dns.RcodeSuccess, answer: []string{"www.example.test.\t300\tIN\tA\t192.0.2.1"}},
		{name: "missing.example.test.", qtype: dns.TypeA, udp: 4096, rcode: dns.RcodeNameError},
	})
}

// forwardCorefile forwards every name to {{upstream}}, with {{plugin}}.
const forwardCorefile = `.:{{dns}} {
    bind 127.0.0.1
    {{plugin}}
    forward . {{upstream}}
}
`

func TestModifiersNSID(t *testing.T) {
	// nsid's README example, on a zone file rather than whoami (whose
	// answer holds the client's port, different for each question).
	s := serveZoneBoth(t, "nsid Use The Force")
	qs := []modQuestion{
		{name: "www.example.org.", qtype: dns.TypeA, udp: 4096, nsid: true, answer: []string{"www.example.org.\t3600\tIN\tA\t127.0.0.1"}},
		{name: "www.example.org.", qtype: dns.TypeA, udp: 4096},
		{name: "www.example.org.", qtype: dns.TypeA},
		{name: "nope.example.org.", qtype: dns.TypeA, udp: 4096, nsid: true, rcode: dns.RcodeNameError},
		{name: "big.example.org.", qtype: dns.TypeA, udp: 1232, nsid: true},
	}
	askAlike(t, s.shardns, s.coredns, qs, echoedSize, negativeSOATTL, nsidDO)
	r, err := testutil.ExchangeMsg(s.shardns, "udp", qs[0].msg())
	if err != nil {
		t.Fatal(err)
	}
	if got := nsidOf(r); got != "Use The Force" {
		t.Errorf("NSID %q, want \"Use The Force\"", got)
	}

	// Without data, the hostname: both run here, so both send this one.
	s = serveZoneBoth(t, "nsid")
	askAlike(t, s.shardns, s.coredns, qs[:2], nsidDO)
	host, _ := os.Hostname()
	if r, err = testutil.ExchangeMsg(s.shardns, "udp", qs[0].msg()); err != nil || nsidOf(r) != host {
		t.Errorf("NSID %q (%v), want the hostname %q", nsidOf(r), err, host)
	}
}

// nsidOf is the NSID option's data in r, "" without one.
func nsidOf(r *dns.Msg) string {
	if opt := r.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if n, ok := o.(*dns.EDNS0_NSID); ok {
				b, _ := hex.DecodeString(n.Nsid)
				return string(b)
			}
		}
	}
	return ""
}

func TestModifiersHeader(t *testing.T) {
	www := []string{"www.example.org.\t3600\tIN\tA\t127.0.0.1"}
	questions := []modQuestion{
		{name: "www.example.org.", qtype: dns.TypeA, udp: 4096, answer: www},
		{name: "www.example.org.", qtype: dns.TypeA, noRD: true, answer: www},
		{name: "nope.example.org.", qtype: dns.TypeA, rcode: dns.RcodeNameError},
		{name: "alias.example.org.", qtype: dns.TypeA, noRD: true, udp: 1232},
	}
	// header's three README examples.
	for _, rules := range []string{
		"response set ra",
		"response set ra aa\n        response clear rd",
		"query set rd",
	} {
		t.Run(strings.ReplaceAll(rules, "\n        ", "; "), func(t *testing.T) {
			s := serveZoneBoth(t, "header {\n        "+rules+"\n    }")
			askAlike(t, s.shardns, s.coredns, questions, echoedSize, negativeSOATTL)
		})
	}
}

// dns64Corefile answers example.org from a zone file and forwards the
// rest, with DNS64 ({{options}}), on IPv4 and IPv6 loopback.
const dns64Corefile = `.:{{dns}} {
    bind 127.0.0.1 ::1
    dns64 {{options}}
    file {{db}} example.org
    forward . {{upstream}}
}
`

// onIPv6 is addr's port on the IPv6 loopback.
func onIPv6(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("::1", port)
}

func TestModifiersDNS64(t *testing.T) {
	u := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1", "v6.example.test. 300 IN A 192.0.2.2",
		"v6.example.test. 300 IN AAAA 2001:db8::2")
	db := writeModifiersZone(t)
	serve := func(options string) (shardns, coredns string) {
		s := serveBoth(t, dns64Corefile, map[string]string{"options": options, "db": db, "upstream": u.Addr}, "www.example.org.", dns.RcodeSuccess)
		return s.shardns, s.coredns
	}
	// The README's examples: the well-known prefix, a prefix of its own
	// (both forms), translate_all and allow_ipv4.
	shardns, coredns := serve("")
	base := []modQuestion{
		// From the zone file: answered in place.
		{name: "v4only.example.org.", qtype: dns.TypeAAAA, udp: 4096, answer: []string{"v4only.example.org.\t300\tIN\tAAAA\t64:ff9b::c000:221"}},
		{name: "dual.example.org.", qtype: dns.TypeAAAA, udp: 4096, answer: []string{"dual.example.org.\t300\tIN\tAAAA\t2001:db8::34"}},
		{name: "alias.example.org.", qtype: dns.TypeAAAA},
		{name: "nope.example.org.", qtype: dns.TypeAAAA, rcode: dns.RcodeNameError},
		{name: "v4only.example.org.", qtype: dns.TypeA, answer: []string{"v4only.example.org.\t300\tIN\tA\t192.0.2.33"}},
		// Forwarded: the AAAA and then the A question go upstream.
		{name: "www.example.test.", qtype: dns.TypeAAAA, udp: 1232, answer: []string{"www.example.test.\t60\tIN\tAAAA\t64:ff9b::c000:201"}},
		{name: "v6.example.test.", qtype: dns.TypeAAAA, answer: []string{"v6.example.test.\t300\tIN\tAAAA\t2001:db8::2"}},
		{name: "missing.example.test.", qtype: dns.TypeAAAA, rcode: dns.RcodeNameError},
	}
	known := []knownDifference{echoedSize, negativeSOATTL}
	askAlike(t, onIPv6(t, shardns), onIPv6(t, coredns), base, known...)
	// Over IPv4, no synthesis.
	askAlike(t, shardns, coredns, []modQuestion{
		{name: "v4only.example.org.", qtype: dns.TypeAAAA, answer: []string{}},
		{name: "www.example.test.", qtype: dns.TypeAAAA, answer: []string{}},
	}, known...)

	for _, c := range []struct {
		options string
		ipv4    bool
		qs      []modQuestion
	}{
		{"64:1337::/96", false, []modQuestion{
			{name: "v4only.example.org.", qtype: dns.TypeAAAA, answer: []string{"v4only.example.org.\t300\tIN\tAAAA\t64:1337::c000:221"}},
			{name: "www.example.test.", qtype: dns.TypeAAAA, answer: []string{"www.example.test.\t60\tIN\tAAAA\t64:1337::c000:201"}},
		}},
		{"{\n        prefix 2001:db8::/32\n    }", false, []modQuestion{
			{name: "v4only.example.org.", qtype: dns.TypeAAAA, answer: []string{"v4only.example.org.\t300\tIN\tAAAA\t2001:db8:c000:221::"}},
		}},
		{"{\n        translate_all\n    }", false, []modQuestion{
			{name: "dual.example.org.", qtype: dns.TypeAAAA, answer: []string{"dual.example.org.\t300\tIN\tAAAA\t64:ff9b::c000:222"}},
			{name: "v6.example.test.", qtype: dns.TypeAAAA, answer: []string{"v6.example.test.\t300\tIN\tAAAA\t64:ff9b::c000:202"}},
		}},
		{"{\n        allow_ipv4\n    }", true, []modQuestion{
			{name: "v4only.example.org.", qtype: dns.TypeAAAA, answer: []string{"v4only.example.org.\t300\tIN\tAAAA\t64:ff9b::c000:221"}},
			{name: "www.example.test.", qtype: dns.TypeAAAA, udp: 4096, answer: []string{"www.example.test.\t60\tIN\tAAAA\t64:ff9b::c000:201"}},
		}},
	} {
		t.Run(strings.Join(strings.Fields(c.options), " "), func(t *testing.T) {
			shardns, coredns := serve(c.options)
			if !c.ipv4 {
				shardns, coredns = onIPv6(t, shardns), onIPv6(t, coredns)
			}
			askAlike(t, shardns, coredns, c.qs, known...)
		})
	}
}

// timeoutsCorefile is timeouts' README example for plain DNS, with
// short timeouts: a first query within {{read}}, the next within {{idle}}.
const timeoutsCorefile = `.:{{dns}} {
    bind 127.0.0.1
    timeouts {
        read {{read}}
        idle {{idle}}
    }
    file {{db}} example.org
}
`

func TestModifiersTimeouts(t *testing.T) {
	s := serveBoth(t, timeoutsCorefile, map[string]string{"read": "1s", "idle": "3s", "db": writeModifiersZone(t)}, "www.example.org.", dns.RcodeSuccess)
	for _, addr := range []string{s.shardns, s.coredns} {
		// A connection that sends nothing is closed at the read timeout.
		silent, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		silent.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = silent.Read(make([]byte, 1))
		silent.Close()
		if took := time.Since(start); !closedBy(err) || took < 500*time.Millisecond || took > 2500*time.Millisecond {
			t.Errorf("%s: a silent connection ended with %v after %v, want closed at the 1s read timeout", addr, err, took)
		}
		// After a query, the idle timeout applies.
		c, err := dns.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WriteMsg(modQuestion{name: "www.example.org.", qtype: dns.TypeA}.msg()); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ReadMsg(); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		c.SetReadDeadline(time.Now().Add(6 * time.Second))
		_, err = c.Conn.Read(make([]byte, 1))
		c.Close()
		if took := time.Since(start); !closedBy(err) || took < 2*time.Second || took > 4500*time.Millisecond {
			t.Errorf("%s: an idle connection ended with %v after %v, want closed at the 3s idle timeout", addr, err, took)
		}
	}
}

// closedBy reports whether a read error is the server closing the
// connection.
func closedBy(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || strings.Contains(fmt.Sprint(err), "reset by peer")
}

// Options CoreDNS refuses to start on stop `serve --corefile` at start,
// naming the Corefile's line.
func TestModifiersBadOptions(t *testing.T) {
	for _, c := range []struct{ plugin, want string }{
		{"bufsize 5000", ":3: bufsize 5000: the size must be a number from 512 to 4096"},
		{"nsid " + strings.Repeat("x", 300), ":3: nsid: the data is 300 bytes, shardns sends at most 255"},
		{"header {\n        response set ad\n    }", ":4: header response set ad: flag ad is not aa, ra or rd"},
		{"dns64 64:ff9b::/80", ":3: dns64 prefix 64:ff9b::/80: the length must be 32, 40, 48, 56, 64 or 96 (RFC 6052), got 80"},
		{"timeouts {\n        read -1s\n    }", ":4: timeouts read -1s: must be between 1s and 24h"},
	} {
		run := harness.RenderCorefile(t, zoneCorefile, map[string]string{"plugin": c.plugin, "db": writeModifiersZone(t)})
		path := filepath.Join(t.TempDir(), "Corefile")
		if err := os.WriteFile(path, []byte(run.Text), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, harness.Bin, "serve", "--corefile", path).CombinedOutput()
		timedOut := ctx.Err() != nil
		cancel()
		if err == nil || timedOut || !strings.Contains(string(out), path+c.want) {
			t.Errorf("%s: serve --corefile: %v\n%s\nwant it to exit with %q", c.plugin, err, out, path+c.want)
		}
	}
}
