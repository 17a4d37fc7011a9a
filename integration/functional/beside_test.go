package functional

import (
	"bytes"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// The helpers here serve one Corefile by `shardns serve --corefile` and
// by CoreDNS and compare everything a client reads of their answers.

// ttlSlack is how far apart, in seconds, the two servers' TTLs of a
// record may be: an answer from a cache counts down, and a second may
// turn between asking one server and the other.
const ttlSlack = 2

// alikeResponses asks shardns and CoreDNS each question over UDP and
// TCP: the two responses must have the same rcode, header flags and
// records in the answer, authority and additional sections (the OPT
// record too), TTLs at most ttlSlack apart, once the known differences
// are applied to CoreDNS's. harness.AskBoth checks the rcode and answer each
// question wants; this checks the rest is CoreDNS's too.
func alikeResponses(t *testing.T, shardns, coredns string, qs []harness.Question, known ...knownDifference) {
	t.Helper()
	for _, q := range qs {
		for _, proto := range []string{"udp", "tcp"} {
			var text [2]string
			var ttls [2][]uint32
			for i, addr := range []string{shardns, coredns} {
				r, err := testutil.Exchange(addr, proto, q.Name, q.Qtype)
				if err != nil {
					t.Fatalf("%s %s over %s from %s: %v", q.Name, dns.TypeToString[q.Qtype], proto, addr, err)
				}
				if i == 1 {
					for _, k := range known {
						k(modQuestion{name: q.Name, qtype: q.Qtype}, r)
					}
				}
				text[i], ttls[i] = splitTTLs(r)
			}
			if text[0] != text[1] || !ttlsClose(ttls[0], ttls[1]) {
				t.Errorf("%s %s over %s: shardns answers\n%s\nTTLs %v\nCoreDNS answers\n%s\nTTLs %v",
					q.Name, dns.TypeToString[q.Qtype], proto, text[0], ttls[0], text[1], ttls[1])
			}
		}
	}
}

// splitTTLs renders r as renderResponse does with every TTL 0 (and the
// serial of the cluster zones' SOA 0, and a truncated answer's records
// without their data), and lists the TTLs apart, in the rendering's
// order of records.
func splitTTLs(r *dns.Msg) (string, []uint32) {
	c := r.Copy()
	if c.Truncated {
		// A truncated answer keeps the records that come first in the
		// upstream's order, which Unbound turns from one query to the
		// next: how many records fit is compared, not which.
		for i, rr := range c.Answer {
			c.Answer[i] = &dns.RFC3597{Hdr: *rr.Header()}
		}
	}
	var ttls []uint32
	for _, section := range [][]dns.RR{c.Answer, c.Ns, c.Extra} {
		slices.SortFunc(section, func(a, b dns.RR) int { return strings.Compare(withoutTTL(a), withoutTTL(b)) })
		for _, rr := range section {
			if rr.Header().Rrtype == dns.TypeOPT {
				continue // its TTL field holds the extended rcode and flags, rendered apart
			}
			ttls = append(ttls, rr.Header().Ttl)
			rr.Header().Ttl = 0
			if soa, ok := rr.(*dns.SOA); ok && strings.HasPrefix(soa.Ns, "ns.dns.") {
				soa.Serial = 0 // the cluster zones' SOA: its serial is when the server last saw a change
			}
		}
	}
	return renderResponse(c), ttls
}

func withoutTTL(rr dns.RR) string {
	c := dns.Copy(rr)
	c.Header().Ttl = 0
	return c.String()
}

// ttlsClose reports whether a and b, TTLs of the same records, are each
// at most ttlSlack apart.
func ttlsClose(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if max(a[i], b[i])-min(a[i], b[i]) > ttlSlack {
			return false
		}
	}
	return true
}

// besideCorefile is a Corefile that `shardns serve --corefile` and
// CoreDNS each serve from a folder of their own, on ports of their own.
type besideCorefile struct {
	tmpl string            // the Corefile, its {{name}}s as harness.RenderCorefile fills them
	vars map[string]string // harness.RenderCorefile's values; {{dir}} is the folder
	// files, unless nil, returns what the folder holds beside the
	// Corefile, by relative name; render fills a template's {{name}}s
	// as the Corefile's, on the same ports.
	files   func(render func(tmpl string) string) map[string]string
	probe   string // a name CoreDNS answers NOERROR once it serves
	convert bool   // whether `shardns convert` must take the whole file
}

// serve starts shardns and then CoreDNS, each in its folder, as CoreDNS
// reads relative paths from its working directory, and returns each
// one's addresses by {{name}} (dns, ...).
func (c besideCorefile) serve(t *testing.T) (shardns, coredns map[string]string) {
	t.Helper()
	shardns = c.start(t, func(dir string, run harness.Corefile) {
		path := filepath.Join(dir, "Corefile")
		if c.convert {
			convertsWhole(t, path)
		}
		harness.Start(t, harness.Options{Dir: dir, Args: []string{"--corefile", path}})
	})
	coredns = c.start(t, func(dir string, run harness.Corefile) {
		harness.StartCoreDNS(t, harness.CoreDNSOptions{Dir: dir, Corefile: run.Text, Addr: run.Addrs["dns"], Probe: c.probe})
	})
	return shardns, coredns
}

// start renders the Corefile and its files into a new folder, has serve
// serve it and returns its addresses.
func (c besideCorefile) start(t *testing.T, serve func(dir string, run harness.Corefile)) map[string]string {
	t.Helper()
	dir := t.TempDir()
	vars := map[string]string{"dir": dir}
	maps.Copy(vars, c.vars)
	run := harness.RenderCorefile(t, c.tmpl, vars)
	files := map[string]string{"Corefile": run.Text}
	if c.files != nil {
		for name, addr := range run.Addrs {
			vars[name] = strings.TrimPrefix(addr, "127.0.0.1:")
		}
		maps.Copy(files, c.files(func(tmpl string) string { return harness.RenderCorefile(t, tmpl, vars).Text }))
	}
	harness.WriteFiles(t, dir, files)
	serve(dir, run)
	return run.Addrs
}

// convertsWhole runs `shardns convert --corefile path` from path's
// folder, where serve reads it and its imports, and fails the test if
// the conversion leaves a line out: every finding must be a note. It
// returns the configuration convert prints.
func convertsWhole(t *testing.T, path string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(harness.Bin, "convert", "--corefile", path)
	cmd.Dir = filepath.Dir(path)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Errorf("shardns convert --corefile %s: %v\n%s", path, err, stderr.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if line != "" && !strings.Contains(line, ": note: ") {
			t.Errorf("shardns convert leaves a line out: %s", line)
		}
	}
	if t.Failed() {
		t.Logf("shardns convert:\n%s%s", stderr.String(), stdout.String())
	}
	return stdout.String()
}

// fmtRR is a zone-file line as testutil.Records renders it.
func fmtRR(name string, ttl int, typ, value string) string {
	return fmt.Sprintf("%s\t%d\tIN\t%s\t%s", name, ttl, typ, value)
}
