package harness

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/shardns/shardns/internal/testutil"
)

// Question is a question and the answer a client must get: the
// rcode and the answer section as zone-file lines.
type Question struct {
	Name   string
	Qtype  uint16
	Rcode  int
	Answer []string
}

// AskBoth asks shardns and CoreDNS each question over UDP and TCP and
// checks both against the expected answer. TTLs of forwarded answers
// count down in the caches, so a TTL may be lower than expected, never
// higher.
func AskBoth(t testing.TB, shardns, coredns string, qs []Question) {
	t.Helper()
	for _, q := range qs {
		AskBothWith(t, shardns, coredns, func(addr, proto string) error { return AnswerMatches(addr, proto, q) })
	}
}

// AnswersAre waits until the server at addr answers each question as it
// wants, over UDP and TCP.
func AnswersAre(t testing.TB, addr string, qs ...Question) {
	t.Helper()
	for _, q := range qs {
		for _, proto := range []string{"udp", "tcp"} {
			testutil.Eventually(t, 10*time.Second, func() error {
				return AnswerMatches(addr, proto, q)
			})
		}
	}
}

// AskBothWith runs check on shardns and CoreDNS over UDP and TCP until
// it passes.
func AskBothWith(t testing.TB, shardns, coredns string, check func(addr, proto string) error) {
	t.Helper()
	for _, addr := range []string{shardns, coredns} {
		for _, proto := range []string{"udp", "tcp"} {
			testutil.Eventually(t, 10*time.Second, func() error { return check(addr, proto) })
		}
	}
}

// AnswerMatches asks addr q over proto and checks the answer against q.
func AnswerMatches(addr, proto string, q Question) error {
	r, err := testutil.Exchange(addr, proto, q.Name, q.Qtype)
	if err != nil {
		return err
	}
	return ResponseMatches(r, addr, proto, q)
}

// ResponseMatches checks r, the response of addr over proto to q, against
// q's rcode and answer.
func ResponseMatches(r *dns.Msg, addr, proto string, q Question) error {
	got := testutil.Records(r.Answer)
	want := slices.Clone(q.Answer)
	slices.Sort(want)
	ok := r.Rcode == q.Rcode && len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = sameRecordTTLAtMost(got[i], want[i])
	}
	if !ok {
		return fmt.Errorf("%s %s from %s over %s: %s %q, want %s %q", q.Name, dns.TypeToString[q.Qtype], addr, proto,
			dns.RcodeToString[r.Rcode], got, dns.RcodeToString[q.Rcode], want)
	}
	return nil
}

// sameRecordTTLAtMost compares zone-file lines, allowing got's TTL to
// be lower than want's (a cached answer counting down).
func sameRecordTTLAtMost(got, want string) bool {
	g, w := strings.Split(got, "\t"), strings.Split(want, "\t")
	if len(g) != len(w) || len(g) < 2 {
		return got == want
	}
	var gt, wt int
	fmt.Sscan(g[1], &gt)
	fmt.Sscan(w[1], &wt)
	g[1], w[1] = "", ""
	return slices.Equal(g, w) && gt <= wt && gt >= 0
}

// Corefile is a Corefile rendered from a template: its text and the
// loopback addresses it was given.
type Corefile struct {
	Text  string
	Addrs map[string]string // {{name}} → 127.0.0.1:port
}

// RenderCorefile fills {{name}} in tmpl from vars, and each other name
// (dns, health, ...) with a loopback port that is free.
func RenderCorefile(t testing.TB, tmpl string, vars map[string]string) Corefile {
	t.Helper()
	r := Corefile{Text: tmpl, Addrs: map[string]string{}}
	for from := 0; ; {
		i := strings.Index(r.Text[from:], "{{")
		if i < 0 {
			return r
		}
		i += from
		j := strings.Index(r.Text[i:], "}}")
		name := r.Text[i+2 : i+j]
		if !renderName.MatchString(name) {
			from = i + j // a Go template of the template plugin ({{ .Name }}): left as it is
			continue
		}
		v, ok := vars[name]
		if !ok {
			v = fmt.Sprint(FreePort(t))
			r.Addrs[name] = "127.0.0.1:" + v
		}
		r.Text = strings.ReplaceAll(r.Text, "{{"+name+"}}", v)
	}
}

// renderName is what RenderCorefile fills in: {{dns}}, {{upstream}}.
var renderName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// CoreDNSOptions say how StartCoreDNS runs CoreDNS beside shardns.
type CoreDNSOptions struct {
	Corefile string // the Corefile's text
	Addr     string // the address it serves DNS on, where it is probed
	// Dir is where the Corefile is written and CoreDNS runs: the folder
	// its imports and relative paths are read from; "" for a new one.
	Dir string
	// Probe is a name (A) CoreDNS answers with Rcode once it serves:
	// NOERROR by default, SERVFAIL where every upstream fails on purpose.
	Probe string
	Rcode int
	// Ready, when set, replaces Probe: its own check that CoreDNS serves,
	// for a Corefile that answers no probe as expected.
	Ready func() error
}

// StartCoreDNS runs the CoreDNS binary (BuildCoreDNS) with o's Corefile,
// waits until it serves and stops it when the test ends; it returns
// o.Addr.
func StartCoreDNS(t testing.TB, o CoreDNSOptions) string {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	ready := o.Ready
	if ready == nil {
		ready = func() error {
			r, err := testutil.Exchange(o.Addr, "udp", o.Probe, dns.TypeA)
			if err == nil && r.Rcode != o.Rcode {
				err = fmt.Errorf("%s: %s", o.Probe, dns.RcodeToString[r.Rcode])
			}
			return err
		}
	}
	return startCoreDNS(t, o.Dir, o.Corefile, o.Addr, ready)
}

// startCoreDNS runs CoreDNS and waits until ready succeeds.
func startCoreDNS(t testing.TB, dir, corefile, addr string, ready func() error) string {
	t.Helper()
	// Another server on addr would answer the readiness probe while
	// CoreDNS fails to bind it and exits: the test would compare that
	// server with itself.
	if l, err := net.Listen("tcp", addr); err != nil {
		t.Fatalf("CoreDNS's address %s is taken before it starts (given to another server too?): %v", addr, err)
	} else {
		l.Close()
	}
	bin := BuildCoreDNS(t)
	conf := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(conf, []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	cmd := exec.Command(bin, "-conf", conf)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
			t.Errorf("coredns exited during the test:\n%s", log.String())
		default:
		}
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("coredns log:\n%s", log.String())
		}
	})
	testutil.Eventually(t, 20*time.Second, func() error {
		select {
		case <-done:
			return fmt.Errorf("coredns exited:\n%s", log.String())
		default:
		}
		return ready()
	})
	return addr
}

// BuildCoreDNS returns the CoreDNS binary of integration/scripts/build-coredns.sh
// (built once into the cache folder), or $SHARDNS_COREDNS if set.
func BuildCoreDNS(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("SHARDNS_COREDNS"); p != "" {
		return p
	}
	cmd := exec.Command(filepath.Join(Root(t), "integration", "scripts", "build-coredns.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/build-coredns.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// distributionsDir holds the default Corefiles of the distributions and
// installers, each with its source and how it was rendered.
const distributionsDir = "corefile/testdata/distributions" // under Root

// ReadDistribution reads the default Corefile of a distribution, less
// the comment lines that head it (its source, how it was rendered).
func ReadDistribution(t testing.TB, name string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(Root(t), distributionsDir, name+".Corefile"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	for strings.HasPrefix(text, "#") {
		_, text, _ = strings.Cut(text, "\n")
	}
	return text
}

// LoopbackCorefile turns a published Corefile (or a coredns-custom file)
// into a template for RenderCorefile, changing only what a test on
// loopback needs; every other line stays as the distribution ships it.
func LoopbackCorefile(text string) string {
	for _, s := range []struct{ re, with string }{
		// A server block on port 53 listens on the test's free port,
		// on loopback only.
		{`(?m)^(\S+):53 \{$`, "$1:{{dns}} {\n    bind 127.0.0.1"},
		// health (:8080), ready (:8181) and prometheus (:9153) listen on
		// every address by default: free loopback ports instead.
		{`(?m)^([ \t]*)health\b(?: [^\s{]+)?`, "${1}health 127.0.0.1:{{health}}"},
		{`(?m)^([ \t]*)ready\b(?: [^\s{]+)?`, "${1}ready 127.0.0.1:{{ready}}"},
		{`(?m)^([ \t]*)prometheus\b(?: [^\s{]+)?`, "${1}prometheus 127.0.0.1:{{metrics}}"},
		// The API server is the test's, reached by its kubeconfig rather
		// than a pod's service account.
		{`(?m)^([ \t]*)kubernetes ([^{\n]*)\{$`, "${1}kubernetes ${2}{\n${1}  kubeconfig {{kubeconfig}}"},
		// The node's resolvers and public ones are the test's Unbound.
		{`(?m)^([ \t]*forward \. )(?:/etc/resolv\.conf|8\.8\.8\.8 8\.8\.4\.4)`, "${1}{{upstream}}"},
		// loop's probe sends a random name upstream, which Unbound would
		// resolve on the internet: no query may leave the host.
		{`(?m)^[ \t]*loop\n`, ""},
	} {
		text = regexp.MustCompile(s.re).ReplaceAllString(text, s.with)
	}
	return text
}
