package hosts

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/internal/testutil"
)

func TestParse(t *testing.T) {
	in := `# comment line
127.0.0.1   localhost
192.0.2.10  Web.Example.com  web   # trailing comment
fe80::1%eth0 link.local.
::ffff:192.0.2.11 mapped.example.com

`
	got, err := Parse(strings.NewReader(in), "hosts")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range got {
		lines = append(lines, e.Addr.String()+" "+strings.Join(e.Names, " "))
	}
	want := []string{"127.0.0.1 localhost.", "192.0.2.10 web.example.com. web.", "fe80::1 link.local.",
		"::ffff:192.0.2.11 mapped.example.com."}
	if strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Fatalf("got %q\nwant %q", lines, want)
	}
}

func TestParseErrorsNameTheLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"127.0.0.1 ok\n300.1.1.1 bad\n", `hosts: line 2: "300.1.1.1" is not an IP address`},
		{"192.0.2.1\n", `hosts: line 1: "192.0.2.1": want an IP address and at least one name`},
		{"\n\n192.0.2.1 a..b\n", `hosts: line 3: "a..b" is not a host name`},
	} {
		_, err := Parse(strings.NewReader(c.in), "hosts")
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: err %v, want %s", c.in, err, c.want)
		}
	}
}

func entries(t *testing.T, lines ...string) []Entry {
	t.Helper()
	out, err := Parse(strings.NewReader(strings.Join(lines, "\n")), "test")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLookup(t *testing.T) {
	all := entries(t,
		"192.0.2.10 web.example.com",
		"192.0.2.11 web.example.com db.example.com",
		"192.0.2.10 web.example.com", // a repeat counts once
		"2001:db8::10 web.example.com",
		"192.0.2.20 v4only.example.com",
		"192.0.2.30 other.test")
	type result struct {
		verdict Verdict
		records []string
	}
	for _, c := range []struct {
		desc  string
		opts  Options
		name  string
		qtype uint16
		want  result
	}{
		{"A", Options{TTL: 60}, "web.example.com.", dns.TypeA,
			result{Answer, []string{"web.example.com.\t60\tIN\tA\t192.0.2.10", "web.example.com.\t60\tIN\tA\t192.0.2.11"}}},
		{"AAAA", Options{TTL: 60}, "web.example.com.", dns.TypeAAAA,
			result{Answer, []string{"web.example.com.\t60\tIN\tAAAA\t2001:db8::10"}}},
		{"the other family: NODATA", Options{TTL: 60}, "v4only.example.com.", dns.TypeAAAA, result{Answer, nil}},
		{"another type: NODATA", Options{TTL: 60}, "web.example.com.", dns.TypeMX, result{Answer, nil}},
		{"no entry, no fallthrough: SERVFAIL", Options{}, "missing.example.com.", dns.TypeA, result{Fail, nil}},
		{"no entry, fallthrough every name", Options{Fallthrough: []string{"."}}, "missing.example.com.", dns.TypeA, result{Pass, nil}},
		{"no entry, fallthrough zone", Options{Fallthrough: []string{"example.com."}}, "missing.example.com.", dns.TypeA, result{Pass, nil}},
		{"no entry, fallthrough elsewhere", Options{Fallthrough: []string{"example.org."}}, "missing.example.com.", dns.TypeA, result{Fail, nil}},
		{"outside the zones", Options{Zones: []string{"example.com."}}, "cluster.local.", dns.TypeA, result{Pass, nil}},
		{"entry outside the zones is left out", Options{Zones: []string{"example.com."}}, "other.test.", dns.TypeA, result{Pass, nil}},
		{"zone boundary", Options{Zones: []string{"example.com."}}, "xexample.com.", dns.TypeA, result{Pass, nil}},
		{"PTR of every name of the address", Options{TTL: 60}, "11.2.0.192.in-addr.arpa.", dns.TypePTR,
			result{Answer, []string{"11.2.0.192.in-addr.arpa.\t60\tIN\tPTR\tdb.example.com.", "11.2.0.192.in-addr.arpa.\t60\tIN\tPTR\tweb.example.com."}}},
		{"PTR of IPv6", Options{TTL: 60}, "0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.", dns.TypePTR,
			result{Answer, []string{"0.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.\t60\tIN\tPTR\tweb.example.com."}}},
		{"PTR of an unknown address passes, even without fallthrough", Options{}, "99.2.0.192.in-addr.arpa.", dns.TypePTR, result{Pass, nil}},
		{"PTR outside the zones is still answered", Options{Zones: []string{"example.com."}}, "20.2.0.192.in-addr.arpa.", dns.TypePTR,
			result{Answer, []string{"20.2.0.192.in-addr.arpa.\t0\tIN\tPTR\tv4only.example.com."}}},
		{"noReverse", Options{NoReverse: true}, "10.2.0.192.in-addr.arpa.", dns.TypePTR, result{Pass, nil}},
	} {
		t.Run(c.desc, func(t *testing.T) {
			rrs, v := NewSnapshot(c.opts, all).Lookup(c.name, c.qtype)
			var got []string
			for _, rr := range rrs {
				got = append(got, rr.String())
			}
			slices.Sort(got)
			if v != c.want.verdict || strings.Join(got, "|") != strings.Join(c.want.records, "|") {
				t.Fatalf("got %d %q, want %d %q", v, got, c.want.verdict, c.want.records)
			}
		})
	}
}

func TestLookupAllocatesNothing(t *testing.T) {
	s := NewSnapshot(Options{Zones: []string{"example.com."}}, entries(t, "192.0.2.10 web.example.com"))
	allocs := testing.AllocsPerRun(100, func() {
		s.Lookup("web.example.com.", dns.TypeA)
		s.Lookup("web.shop.svc.cluster.local.", dns.TypeA)
		s.Lookup("10.2.0.192.in-addr.arpa.", dns.TypePTR)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per lookup", allocs)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestNewErrorsNameTheSource(t *testing.T) {
	if _, err := New(Config{Entries: []string{"192.0.2.1 a", "nope b"}, Logger: quietLogger()}); err == nil ||
		!strings.Contains(err.Error(), `hosts.entries[1]: "nope" is not an IP address`) {
		t.Fatalf("err %v", err)
	}
	path := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(path, []byte("192.0.2.1 ok\n192.0.2.2 b@d!\n"), 0o644)
	if _, err := New(Config{Files: []string{path}, Logger: quietLogger()}); err == nil ||
		!strings.Contains(err.Error(), path+": line 2:") {
		t.Fatalf("err %v", err)
	}
	if _, err := New(Config{Files: []string{path + ".missing"}, Logger: quietLogger()}); err == nil ||
		!strings.Contains(err.Error(), "hosts.missing") {
		t.Fatalf("err %v", err)
	}
}

func addrs(s *Snapshot, name string) string {
	rrs, _ := s.Lookup(name, dns.TypeA)
	var out []string
	for _, rr := range rrs {
		out = append(out, rr.(*dns.A).A.String())
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

// write replaces the file and sets its modification time, so a rewrite within the
// file system's time resolution is still seen as a change.
func write(t *testing.T, path, content string, mtime time.Time) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

func TestReloadKeepsTheLastGoodFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	start := time.Now().Add(-time.Hour)
	write(t, path, "192.0.2.1 web.example.com\n", start)
	h, err := New(Config{Entries: []string{"192.0.2.9 inline.example.com"}, Files: []string{path},
		Options: Options{Fallthrough: []string{"."}}, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if got := addrs(h.Snapshot(), "web.example.com."); got != "192.0.2.1" {
		t.Fatalf("at start: %q", got)
	}
	if h.Reload() {
		t.Fatal("an unchanged file published a snapshot")
	}

	write(t, path, "192.0.2.2 web.example.com\n192.0.2.3 new.example.com\n", start.Add(time.Second))
	if !h.Reload() || addrs(h.Snapshot(), "web.example.com.") != "192.0.2.2" || addrs(h.Snapshot(), "new.example.com.") != "192.0.2.3" {
		t.Fatalf("after an edit: %q %q", addrs(h.Snapshot(), "web.example.com."), addrs(h.Snapshot(), "new.example.com."))
	}

	write(t, path, "192.0.2.4 web.example.com\nnot-an-ip broken\n", start.Add(2*time.Second))
	if h.Reload() || addrs(h.Snapshot(), "web.example.com.") != "192.0.2.2" {
		t.Fatalf("a broken edit replaced the entries: %q", addrs(h.Snapshot(), "web.example.com."))
	}
	os.Remove(path)
	if h.Reload() || addrs(h.Snapshot(), "new.example.com.") != "192.0.2.3" {
		t.Fatal("a removed file dropped its last good entries")
	}
	if addrs(h.Snapshot(), "inline.example.com.") != "192.0.2.9" {
		t.Fatal("inline entries lost")
	}

	write(t, path, "192.0.2.5 web.example.com\n", start.Add(3*time.Second))
	if !h.Reload() || addrs(h.Snapshot(), "web.example.com.") != "192.0.2.5" || addrs(h.Snapshot(), "new.example.com.") != "" {
		t.Fatalf("after the fix: %q", addrs(h.Snapshot(), "web.example.com."))
	}
}

// TestReloadWaitsForAFileWrittenInPlace: a writer that truncates the
// file and then writes it leaves it empty for a moment. A check that
// finds it just modified waits for the next one to find it unchanged, so
// the empty moment is never served, nor kept as the last good version
// when the edit turns out broken.
func TestReloadWaitsForAFileWrittenInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	write(t, path, "192.0.2.1 web.example.com\n", time.Now().Add(-time.Hour))
	h, err := New(Config{Files: []string{path}, Interval: time.Hour, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	write(t, path, "", now) // truncated
	if h.Reload() || addrs(h.Snapshot(), "web.example.com.") != "192.0.2.1" {
		t.Fatalf("a file modified just now was read at once: %q", addrs(h.Snapshot(), "web.example.com."))
	}
	write(t, path, "192.0.2.2 web.example.com\nnot-an-ip broken\n", now.Add(time.Millisecond)) // then written
	if h.Reload() || addrs(h.Snapshot(), "web.example.com.") != "192.0.2.1" {
		t.Fatalf("a file modified since the last check was read: %q", addrs(h.Snapshot(), "web.example.com."))
	}
	if h.Reload() || addrs(h.Snapshot(), "web.example.com.") != "192.0.2.1" {
		t.Fatalf("a broken edit replaced the entries: %q", addrs(h.Snapshot(), "web.example.com."))
	}
	write(t, path, "192.0.2.3 web.example.com\n", now.Add(2*time.Millisecond))
	if h.Reload() {
		t.Fatal("the fix was read at the check that first saw it")
	}
	if !h.Reload() || addrs(h.Snapshot(), "web.example.com.") != "192.0.2.3" {
		t.Fatalf("the fix, unchanged for a check: %q", addrs(h.Snapshot(), "web.example.com."))
	}
}

func TestStartReloadsOnItsOwn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	write(t, path, "192.0.2.1 web.example.com\n", time.Now().Add(-time.Hour))
	h, err := New(Config{Files: []string{path}, Interval: 10 * time.Millisecond, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	h.Start()
	defer h.Stop()
	write(t, path, "192.0.2.7 web.example.com\n", time.Now())
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := addrs(h.Snapshot(), "web.example.com."); got != "192.0.2.7" {
			return fmt.Errorf("web.example.com is %q", got)
		}
		return nil
	})
}
