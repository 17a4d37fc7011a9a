package zone

import (
	"net/netip"
	"strings"
	"testing"
	"unsafe"

	"github.com/miekg/dns"
)

// exampleOrg holds every record type a file zone serves, a delegation
// with in-domain and sibling glue, wildcards, empty non-terminals and
// CNAME chains. Its negative TTL is min(3600, 300).
const exampleOrg = `$ORIGIN example.org.
$TTL 3600
@        IN SOA   ns1 hostmaster 2024010101 7200 3600 1209600 300
         IN NS    ns1
         IN NS    ns2.example.net.
         IN MX    10 mail
         IN TXT   "v=spf1 -all"
         IN CAA   0 issue "letsencrypt.org"
         IN A     192.0.2.1
ns1      IN A     192.0.2.53
         IN AAAA  2001:db8::53
mail     IN A     192.0.2.25
         IN AAAA  2001:db8::25
www      IN CNAME web
web      IN A     192.0.2.80
         IN AAAA  2001:db8::80
alias    IN CNAME www
ext      IN CNAME example.com.
dangling IN CNAME gone
loop1    IN CNAME loop2
loop2    IN CNAME loop1
_sip._tcp IN SRV  10 60 5060 sip
sip      IN A     192.0.2.60
*.wild   IN A     192.0.2.99
*.wild   IN TXT   "wild"
*.cn     IN CNAME web
a.b.c    IN A     192.0.2.3
*.c      IN A     192.0.2.4
sub      IN NS    ns1.sub
sub      IN NS    ns1
sub      IN DS    12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF
ns1.sub  IN A     192.0.2.54
1.2      IN PTR   web.example.org.
MiXed    IN A     192.0.2.7
`

// parseZone reads a zone file text into a FileZone, failing the test on
// any error.
func parseZone(t testing.TB, origin, text string, transferTo ...netip.Prefix) *FileZone {
	t.Helper()
	f, err := readZone(origin, text, transferTo)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func readZone(origin, text string, transferTo []netip.Prefix) (*FileZone, error) {
	zp := dns.NewZoneParser(strings.NewReader(text), origin, "test.zone")
	var rrs []dns.RR
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		rrs = append(rrs, rr)
	}
	if err := zp.Err(); err != nil {
		return nil, err
	}
	return NewFileZone(origin, "test.zone", rrs, transferTo)
}

// fileCase is one question to a file zone and the response a client must
// see; every section is compared in full.
type fileCase struct {
	qname    string
	qtype    uint16
	rcode    int
	referral bool
	answer   []string
	ns       []string
	extra    []string
}

func runFileCases(t *testing.T, v Reader, cfg *Config, cases []fileCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.qname+"/"+dns.TypeToString[c.qtype], func(t *testing.T) {
			r := Answer(cfg, v, Question{Name: c.qname, Type: c.qtype})
			if r.Rcode != c.rcode {
				t.Errorf("rcode = %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[c.rcode])
			}
			if r.Referral != c.referral {
				t.Errorf("referral = %v, want %v", r.Referral, c.referral)
			}
			for _, s := range []struct {
				name      string
				got, want []string
			}{{"answer", rrStrings(t, r.Answer), parsed(t, c.answer)},
				{"authority", rrStrings(t, r.Ns), parsed(t, c.ns)},
				{"additional", rrStrings(t, r.Extra), parsed(t, c.extra)}} {
				if strings.Join(s.got, "\n") != strings.Join(s.want, "\n") {
					t.Errorf("%s:\n%s\nwant:\n%s", s.name, strings.Join(s.got, "\n"), strings.Join(s.want, "\n"))
				}
			}
		})
	}
}

var (
	orgNS = []string{"example.org. 3600 IN NS ns1.example.org.", "example.org. 3600 IN NS ns2.example.net."}
	// orgNeg is the SOA of negative answers: its TTL is the minimum, 300.
	orgNeg = []string{"example.org. 300 IN SOA ns1.example.org. hostmaster.example.org. 2024010101 7200 3600 1209600 300"}
	subNS  = []string{"sub.example.org. 3600 IN NS ns1.sub.example.org.", "sub.example.org. 3600 IN NS ns1.example.org."}
	// subGlue is the in-domain glue and the sibling glue of sub.
	subGlue = []string{"ns1.sub.example.org. 3600 IN A 192.0.2.54",
		"ns1.example.org. 3600 IN A 192.0.2.53", "ns1.example.org. 3600 IN AAAA 2001:db8::53"}
)

func fileView(t testing.TB, cfg *Config) Reader {
	return buildView(t, cfg, true, append(testCluster(), parseZone(t, "example.org.", exampleOrg)))
}

func TestAnswerFileRecordTypes(t *testing.T) {
	cfg := testConfig()
	runFileCases(t, fileView(t, cfg), cfg, []fileCase{
		{qname: "example.org.", qtype: SOA, ns: orgNS, answer: []string{
			"example.org. 3600 IN SOA ns1.example.org. hostmaster.example.org. 2024010101 7200 3600 1209600 300"}},
		// NS at the apex: the addresses of in-zone servers in additional.
		{qname: "example.org.", qtype: NS, answer: orgNS,
			extra: []string{"ns1.example.org. 3600 IN A 192.0.2.53", "ns1.example.org. 3600 IN AAAA 2001:db8::53"}},
		{qname: "example.org.", qtype: A, answer: []string{"example.org. 3600 IN A 192.0.2.1"}, ns: orgNS},
		{qname: "ns1.example.org.", qtype: AAAA, answer: []string{"ns1.example.org. 3600 IN AAAA 2001:db8::53"}, ns: orgNS},
		{qname: "example.org.", qtype: MX, answer: []string{"example.org. 3600 IN MX 10 mail.example.org."}, ns: orgNS,
			extra: []string{"mail.example.org. 3600 IN A 192.0.2.25", "mail.example.org. 3600 IN AAAA 2001:db8::25"}},
		{qname: "example.org.", qtype: TXT, answer: []string{`example.org. 3600 IN TXT "v=spf1 -all"`}, ns: orgNS},
		{qname: "example.org.", qtype: dns.TypeCAA, answer: []string{`example.org. 3600 IN CAA 0 issue "letsencrypt.org"`}, ns: orgNS},
		{qname: "_sip._tcp.example.org.", qtype: SRV, answer: []string{"_sip._tcp.example.org. 3600 IN SRV 10 60 5060 sip.example.org."},
			ns: orgNS, extra: []string{"sip.example.org. 3600 IN A 192.0.2.60"}},
		{qname: "1.2.example.org.", qtype: PTRt, answer: []string{"1.2.example.org. 3600 IN PTR web.example.org."}, ns: orgNS},
		// Owner names are stored lower-case; the query layer restores the
		// letter case of the question.
		{qname: "mixed.example.org.", qtype: A, answer: []string{"mixed.example.org. 3600 IN A 192.0.2.7"}, ns: orgNS},
	})
}

func TestAnswerFileNegative(t *testing.T) {
	cfg := testConfig()
	runFileCases(t, fileView(t, cfg), cfg, []fileCase{
		{qname: "nope.example.org.", qtype: A, rcode: NX, ns: orgNeg},
		{qname: "deep.nope.example.org.", qtype: A, rcode: NX, ns: orgNeg},
		// NODATA: the name exists, the type does not.
		{qname: "web.example.org.", qtype: MX, ns: orgNeg},
		{qname: "example.org.", qtype: SRV, ns: orgNeg},
		// Empty non-terminals exist (RFC 4592 §2.2.2).
		{qname: "b.c.example.org.", qtype: A, ns: orgNeg},
		{qname: "_tcp.example.org.", qtype: SRV, ns: orgNeg},
		// ANY is NODATA here; the query layer makes it RFC 8482's answer.
		{qname: "web.example.org.", qtype: dns.TypeANY, ns: orgNeg},
		// Transfers are the query layer's, over TCP.
		{qname: "example.org.", qtype: dns.TypeAXFR, rcode: dns.RcodeRefused},
		{qname: "example.org.", qtype: dns.TypeIXFR, rcode: dns.RcodeRefused},
	})
}

func TestAnswerFileCNAME(t *testing.T) {
	cfg := testConfig()
	www := "www.example.org. 3600 IN CNAME web.example.org."
	runFileCases(t, fileView(t, cfg), cfg, []fileCase{
		{qname: "www.example.org.", qtype: A, ns: orgNS, answer: []string{www, "web.example.org. 3600 IN A 192.0.2.80"}},
		{qname: "www.example.org.", qtype: CNAME, ns: orgNS, answer: []string{www}},
		// A chain of two, followed inside the zone.
		{qname: "alias.example.org.", qtype: AAAA, ns: orgNS, answer: []string{
			"alias.example.org. 3600 IN CNAME www.example.org.", www, "web.example.org. 3600 IN AAAA 2001:db8::80"}},
		// The target's type is missing: NODATA after the chain.
		{qname: "www.example.org.", qtype: MX, ns: orgNeg, answer: []string{www}},
		// A target in the zone that does not exist: NXDOMAIN (RFC 6604).
		{qname: "dangling.example.org.", qtype: A, rcode: NX, ns: orgNeg,
			answer: []string{"dangling.example.org. 3600 IN CNAME gone.example.org."}},
		// A target outside the zone is left to the client's resolver.
		{qname: "ext.example.org.", qtype: A, ns: orgNS, answer: []string{"ext.example.org. 3600 IN CNAME example.com."}},
		// A loop ends once every link is in the answer.
		{qname: "loop1.example.org.", qtype: A, ns: orgNS, answer: []string{
			"loop1.example.org. 3600 IN CNAME loop2.example.org.", "loop2.example.org. 3600 IN CNAME loop1.example.org."}},
	})
}

func TestAnswerFileWildcard(t *testing.T) {
	cfg := testConfig()
	runFileCases(t, fileView(t, cfg), cfg, []fileCase{
		{qname: "x.wild.example.org.", qtype: A, ns: orgNS, answer: []string{"x.wild.example.org. 3600 IN A 192.0.2.99"}},
		{qname: "a.b.wild.example.org.", qtype: TXT, ns: orgNS, answer: []string{`a.b.wild.example.org. 3600 IN TXT "wild"`}},
		{qname: "x.wild.example.org.", qtype: MX, ns: orgNeg},
		// The wildcard's parent is an empty non-terminal, and the
		// wildcard itself answers when asked by name.
		{qname: "wild.example.org.", qtype: A, ns: orgNeg},
		{qname: "*.wild.example.org.", qtype: A, ns: orgNS, answer: []string{"*.wild.example.org. 3600 IN A 192.0.2.99"}},
		// A synthesised CNAME is chased like any other.
		{qname: "x.cn.example.org.", qtype: A, ns: orgNS, answer: []string{
			"x.cn.example.org. 3600 IN CNAME web.example.org.", "web.example.org. 3600 IN A 192.0.2.80"}},
		// *.c covers y.c; b.c exists (a.b.c is below it), so it is the
		// closest encloser of x.b.c and no wildcard applies (RFC 4592 §3.3.1).
		{qname: "y.c.example.org.", qtype: A, ns: orgNS, answer: []string{"y.c.example.org. 3600 IN A 192.0.2.4"}},
		{qname: "x.b.c.example.org.", qtype: A, rcode: NX, ns: orgNeg},
		{qname: "a.b.c.example.org.", qtype: A, ns: orgNS, answer: []string{"a.b.c.example.org. 3600 IN A 192.0.2.3"}},
		// Existing names are never covered.
		{qname: "x.web.example.org.", qtype: A, rcode: NX, ns: orgNeg},
	})
}

func TestAnswerFileDelegation(t *testing.T) {
	cfg := testConfig()
	runFileCases(t, fileView(t, cfg), cfg, []fileCase{
		{qname: "sub.example.org.", qtype: A, referral: true, ns: subNS, extra: subGlue},
		{qname: "host.sub.example.org.", qtype: A, referral: true, ns: subNS, extra: subGlue},
		{qname: "sub.example.org.", qtype: NS, referral: true, ns: subNS, extra: subGlue},
		// Glue is not authoritative data: asking for it is a referral too.
		{qname: "ns1.sub.example.org.", qtype: A, referral: true, ns: subNS, extra: subGlue},
		// DS lives on the parent's side of the cut.
		{qname: "sub.example.org.", qtype: dns.TypeDS, ns: orgNS, answer: []string{
			"sub.example.org. 3600 IN DS 12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF"}},
		{qname: "x.sub.example.org.", qtype: dns.TypeDS, referral: true, ns: subNS, extra: subGlue},
	})
}

func TestAnswerFileBesideClusterZones(t *testing.T) {
	cfg := testConfig()
	v := fileView(t, cfg)
	runCases(t, v, cfg, []tc{
		{qname: "svc1.ns1.svc.cluster.local.", qtype: A, answer: []string{"svc1.ns1.svc.cluster.local. 5 IN A 10.0.0.1"}},
	})
	for _, name := range []string{"example.net.", "org.", "xexample.org."} {
		if r := Answer(cfg, v, Question{Name: name, Type: A}); !r.External {
			t.Errorf("%s answered as ours: %+v", name, r)
		}
	}
	if got := KeyOf(cfg, v, "x.wild.example.org."); got != "example.org." {
		t.Errorf("KeyOf = %q, want example.org.", got)
	}
}

// A file zone nested in another answers the names below its origin.
func TestAnswerFileNested(t *testing.T) {
	cfg := testConfig()
	inner := parseZone(t, "inner.example.org.", `$TTL 60
@ SOA ns hm 7 1 1 1 30
www A 198.51.100.1`)
	v := buildView(t, cfg, true, []any{parseZone(t, "example.org.", exampleOrg), inner})
	runFileCases(t, v, cfg, []fileCase{
		{qname: "www.inner.example.org.", qtype: A, answer: []string{"www.inner.example.org. 60 IN A 198.51.100.1"}},
		{qname: "nope.inner.example.org.", qtype: A, rcode: NX, ns: []string{
			"inner.example.org. 30 IN SOA ns.inner.example.org. hm.inner.example.org. 7 1 1 1 30"}},
		{qname: "web.example.org.", qtype: A, ns: orgNS, answer: []string{"web.example.org. 3600 IN A 192.0.2.80"}},
	})
}

// placedView is a View whose file zone is held by other replicas, or by
// nobody yet.
type placedView struct {
	dir    *Directory
	remote []string
}

func (p placedView) Directory() *Directory { return p.dir }
func (p placedView) Zone(string) *Snapshot { return nil }
func (p placedView) Remote(string) []string {
	return p.remote
}
func (p placedView) FanOut(string) []string { return nil }
func (p placedView) Loading(string) bool    { return false }

func TestAnswerFileHeldElsewhere(t *testing.T) {
	cfg := testConfig()
	dir := NewDirectory(cfg, nil, true, 1).WithFiles(map[string]struct{}{"example.org.": {}})
	r := Answer(cfg, placedView{dir: dir, remote: []string{"b", "c"}}, Question{Name: "www.example.org.", Type: A})
	if r.Zone != "example.org." || strings.Join(r.Remote, ",") != "b,c" {
		t.Errorf("held by b and c: got zone %q, remote %v", r.Zone, r.Remote)
	}
	r = Answer(cfg, placedView{dir: dir}, Question{Name: "www.example.org.", Type: A})
	if r.Rcode != dns.RcodeServerFailure {
		t.Errorf("known but held nowhere yet: rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
}

func TestNewFileZoneRejects(t *testing.T) {
	for _, c := range []struct{ name, text, want string }{
		{"no SOA", "www 60 A 192.0.2.1", "no SOA record at the origin example.org."},
		{"SOA below the apex", "www 60 SOA ns hm 1 1 1 1 1", "www.example.org. SOA: an SOA record belongs at the origin"},
		{"second SOA", "@ 60 SOA ns hm 1 1 1 1 1\n@ 60 SOA ns hm 2 1 1 1 1", "a second SOA record"},
		{"CNAME and data", "@ 60 SOA ns hm 1 1 1 1 1\nwww 60 A 192.0.2.1\nwww 60 CNAME web", "www.example.org. CNAME: CNAME and other data"},
		{"data after CNAME", "@ 60 SOA ns hm 1 1 1 1 1\nwww 60 CNAME web\nwww 60 TXT x", "www.example.org. TXT: CNAME and other data"},
		{"two CNAMEs", "@ 60 SOA ns hm 1 1 1 1 1\nwww 60 CNAME web\nwww 60 CNAME web2", "a second CNAME"},
		{"out of zone", "@ 60 SOA ns hm 1 1 1 1 1\nwww.example.net. 60 A 192.0.2.1", "www.example.net. A: outside the zone example.org."},
		{"class", "@ 60 SOA ns hm 1 1 1 1 1\nwww 60 CH TXT x", "class CH"},
		{"DNAME", "@ 60 SOA ns hm 1 1 1 1 1\nold 60 DNAME new.example.net.", "DNAME records are not served"},
		{"wildcard NS", "@ 60 SOA ns hm 1 1 1 1 1\n*.w 60 NS ns", "NS records at a wildcard name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := readZone("example.org.", c.text, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "test.zone: ") {
				t.Fatalf("error %v, want one naming test.zone and %q", err, c.want)
			}
		})
	}
}

func TestFileZoneTransfer(t *testing.T) {
	f := parseZone(t, "example.org.", exampleOrg, netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("2001:db8::/32"))
	s := BuildFileZone(f)
	rrs := s.Transfer()
	if len(rrs) != len(f.Records)+1 || rrs[0].Header().Rrtype != SOA || rrs[len(rrs)-1].Header().Rrtype != SOA {
		t.Fatalf("transfer of %d records, want the SOA, %d records, the SOA", len(rrs), len(f.Records)-1)
	}
	for addr, want := range map[string]bool{"127.0.0.1": true, "::ffff:127.0.0.1": true, "127.0.0.2": false,
		"2001:db8::9": true, "2001:db9::1": false} {
		if got := s.TransferAllowed(netip.MustParseAddr(addr)); got != want {
			t.Errorf("TransferAllowed(%s) = %v, want %v", addr, got, want)
		}
	}
	if s.Records() != len(f.Records) {
		t.Errorf("Records() = %d, want %d", s.Records(), len(f.Records))
	}
}

func TestFileAnswerAllocatesNothing(t *testing.T) {
	cfg := testConfig()
	v := fileView(t, cfg)
	for _, q := range []Question{{Name: "web.example.org.", Type: A}, {Name: "nope.example.org.", Type: A}, {Name: "sub.example.org.", Type: A}} {
		if n := testing.AllocsPerRun(100, func() { Answer(cfg, v, q) }); n != 0 {
			t.Errorf("%s: %v allocations per answer, want 0", q.Name, n)
		}
	}
}

func BenchmarkFileAnswer(b *testing.B) {
	cfg := testConfig()
	v := fileView(b, cfg)
	for _, q := range []Question{{Name: "web.example.org.", Type: A}, {Name: "www.example.org.", Type: A}, {Name: "x.wild.example.org.", Type: A},
		{Name: "nope.example.org.", Type: A}, {Name: "host.sub.example.org.", Type: A}} {
		b.Run(q.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Answer(cfg, v, q)
			}
		})
	}
}

// The origin FileOrigin returns is the directory's own string: the query
// fast path asks with a name that aliases the request buffer, and keeps
// the origin as a metrics label after the buffer is reused.
func TestFileOriginDoesNotAliasTheName(t *testing.T) {
	d := (&Directory{}).WithFiles(map[string]struct{}{"example.test.": {}})
	buf := []byte("nope.example.test.")
	origin := d.FileOrigin(unsafe.String(&buf[0], len(buf)))
	copy(buf, "xxxxxxxxxxxxxxxxxx")
	if origin != "example.test." {
		t.Fatalf("origin became %q after the name's buffer was reused", origin)
	}
}

// A root zone file holds every name, and a longer origin wins within it.
func TestFileOriginOfTheRoot(t *testing.T) {
	d := (&Directory{}).WithFiles(map[string]struct{}{".": {}, "example.test.": {}})
	for name, want := range map[string]string{".": ".", "foo.": ".", "a.b.c.": ".", "x.example.test.": "example.test."} {
		if got := d.FileOrigin(name); got != want {
			t.Errorf("FileOrigin(%q) = %q, want %q", name, got, want)
		}
	}
}
