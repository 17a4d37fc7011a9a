package functional

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	promclient "github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/html"

	"github.com/shardns/shardns/httpapi"
	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// The ring's page in a real browser, on a real cluster in a handoff: r0
// served the demo cluster alone, then r1 and r2 joined, and r0 holds the
// zones r2 took through its grace period. The page r0 serves, once its
// script has read /debug/ring a few times, shows every member with its
// state, every zone under each of its owners (the first marked as asked
// first), and the zones r0 hands over, as /debug/ring lists them.
func TestRingViewInBrowser(t *testing.T) {
	requireChromium(t)
	r0 := startRingReplica(t, "r0", "")
	harness.Settled(t, []*harness.Replica{r0}, 1) // r0 owns every zone
	r1 := startRingReplica(t, "r1", r0.Gossip)
	harness.Settled(t, []*harness.Replica{r0, r1}, 2) // still: two replicas own each
	r2 := startRingReplica(t, "r2", r0.Gossip)
	harness.Settled(t, []*harness.Replica{r0, r1, r2}, 3)

	// The zones r0 lost stay in their grace period for a minute: long
	// enough for the page to be read while nothing changes.
	want := stableRing(t, r0, func(r httpapi.Ring) error {
		if len(r.Grace) == 0 {
			return errors.New("no zone in its grace period yet")
		}
		if len(r.Loading) > 0 {
			return fmt.Errorf("still loading %v", r.Loading)
		}
		return nil
	})
	t.Logf("r0 hands over %v", want.Grace)
	start := time.Now()
	dom := domWhileStable(t, r0, want, "http://"+r0.HTTP+"/debug/ring/view")
	t.Logf("the page was read and drawn in %v", time.Since(start).Round(time.Millisecond))
	checkRingDOM(t, dom, want)

	// The terminal's picture of the same ring: printed once, as its
	// output is no terminal here.
	out, err := exec.Command(harness.Bin, "ring", "--http", r0.HTTP, "--view").CombinedOutput()
	if err != nil {
		t.Fatalf("shardns ring --view: %v\n%s", err, out)
	}
	if after, err := r0.Ring(t); err != nil || !sameRing(want, after) {
		t.Fatalf("the ring changed while shardns ring --view read it (%v)", err)
	}
	checkRingTerminal(t, string(out), want)
}

// checkRingTerminal fails t unless out, what `shardns ring --view`
// printed, has a line for each member of want, each zone under each of
// its owners, and a line for each handoff.
func checkRingTerminal(t *testing.T, out string, want httpapi.Ring) {
	t.Helper()
	sections := map[string]string{} // member → its line and the lines under it
	var current string
	for _, line := range strings.Split(out, "\n") {
		if name, _, ok := strings.Cut(line, "  "); ok && !strings.HasPrefix(line, " ") {
			current = strings.TrimSuffix(name, " (this replica)")
		}
		if line == "" {
			current = ""
		}
		if current != "" {
			sections[current] += line + "\n"
		}
	}
	for _, m := range want.Members {
		if _, ok := sections[m.Name]; !ok {
			t.Errorf("shardns ring --view has no line for member %q:\n%s", m.Name, out)
		}
	}
	for zone, owners := range want.Zones {
		for i, o := range owners {
			mark := "▒ "
			if i == 0 {
				mark = "█ "
			}
			if !strings.Contains(sections[o], mark+zone+"  ") && !strings.Contains(sections[o], mark+zone+"\n") {
				t.Errorf("shardns ring --view does not show %q under %s as %q:\n%s", zone, o, mark, sections[o])
			}
		}
	}
	for _, zone := range want.Grace {
		if !strings.Contains(out, "» "+zone+"  lost, held through the grace  "+want.Self+" -> "+strings.Join(want.Zones[zone], ", ")) {
			t.Errorf("shardns ring --view does not show %q handed over:\n%s", zone, out)
		}
	}
}

// Names come from the cluster: a zone, member or address that looks like
// markup is shown as text, and no element of it appears in the page. The
// ring is drawn mid-handoff, one zone in its grace period and the
// hostile one loading, so every place a name is drawn is.
func TestRingViewEscapesNamesInBrowser(t *testing.T) {
	requireChromium(t)
	const (
		zoneName   = `<img src=x onerror="document.title='pwned'">.svc.cluster.local.`
		memberName = `</script><b id="pwned">m</b>`
		remote     = `"><svg onload="document.title='pwned'">`
	)
	hostile := httpapi.Ring{Self: memberName,
		Members: []httpapi.Member{{Name: memberName, Remote: remote, Owner: true}, {Name: "b", Owner: true}},
		Zones:   map[string][]string{zoneName: {memberName, "b"}, "shop.svc.cluster.local.": {"b"}},
		Served:  []string{zoneName}, Replication: 2, Grace: []string{"shop.svc.cluster.local."}, Loading: []string{zoneName}}
	addr := serveRingAPI(t, func() httpapi.Ring { return hostile }, nil)
	dom := dumpDOM(t, "http://"+addr+"/debug/ring/view")
	checkRingDOM(t, dom, hostile)
	doc := parseDOM(t, dom)
	if title := textOf(findElement(doc, func(n *html.Node) bool { return n.Data == "title" })); title != "shardns ring" {
		t.Errorf("the page's title is %q: a name ran as script", title)
	}
	if findElement(doc, func(n *html.Node) bool { return n.Data == "img" || attr(n, "id") == "pwned" }) != nil {
		t.Error("a name became an element of the page")
	}
	if n := findElement(doc, func(n *html.Node) bool { return n.Data == "svg" && attr(n, "onload") != "" }); n != nil {
		t.Error("a remote address became an <svg onload> element of the page")
	}
	zone := findElement(doc, func(n *html.Node) bool { return attr(n, "data-zone") == zoneName })
	if got := textOf(zone); got != zoneName {
		t.Errorf("the hostile zone reads %q, want its name as text", got)
	}
}

// A page whose /debug/ring cannot be read says so in a banner, with the
// replica's answer.
func TestRingViewErrorBanner(t *testing.T) {
	requireChromium(t)
	ring := func() httpapi.Ring {
		return httpapi.Ring{Self: "a", Members: []httpapi.Member{{Name: "a", Owner: true}}}
	}
	failing := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "replica shutting down", http.StatusServiceUnavailable)
	})
	addr := serveRingAPI(t, ring, failing)
	doc := parseDOM(t, dumpDOM(t, "http://"+addr+"/debug/ring/view"))
	banner := findElement(doc, func(n *html.Node) bool { return attr(n, "id") == "error" })
	if banner == nil || !slices.Contains(strings.Fields(attr(banner, "class")), "shown") {
		t.Fatalf("no error banner shown while /debug/ring answers 503")
	}
	if got := textOf(banner); !strings.Contains(got, "503") || !strings.Contains(got, "replica shutting down") {
		t.Errorf("the error banner reads %q, want the status and the replica's answer", got)
	}
	if main := findElement(doc, func(n *html.Node) bool { return n.Data == "main" }); attr(main, "data-state") != "error" {
		t.Errorf("the page's state is %q, want error", attr(main, "data-state"))
	}
}

// requireChromium fails t unless Debian's chromium is installed.
func requireChromium(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("chromium"); err != nil {
		t.Fatal("chromium is not installed (scripts/deps.sh installs it)")
	}
}

// startRingReplica starts a replica process of a cluster serving the demo
// cluster from its manifests, every zone owned by two replicas, joining
// the member whose gossip address is seed unless "".
func startRingReplica(t *testing.T, name, seed string) *harness.Replica {
	t.Helper()
	return harness.LaunchReplica(t, name, []string{seed}, func(join, gossip string, remote int) (*harness.Process, error) {
		return harness.TryStart(t, harness.Options{Config: fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0", lameduck: 0s}
kubernetes: {enabled: false}
manifests: {files: [demo-cluster.yaml]}
forward: {upstreams: []}
cluster:
  nodeName: %s
  %s
  bind: %q
  remote: "127.0.0.1:%d"
  replicationFactor: 2
  gossip: fast
  handoffGrace: 60s
`, name, join, gossip, remote)})

	})
}

// stableRing polls r's /debug/ring until it passes ready and has read
// the same for more than its one-second cache, and returns it.
func stableRing(t *testing.T, r *harness.Replica, ready func(httpapi.Ring) error) httpapi.Ring {
	t.Helper()
	var (
		since  time.Time // when the ring first read as stable does
		stable httpapi.Ring
	)
	testutil.Eventually(t, 20*time.Second, func() error {
		now, err := r.Ring(t)
		if err != nil {
			return err
		}
		if err := ready(now); err != nil {
			since = time.Time{}
			return err
		}
		if since.IsZero() || !sameRing(stable, now) {
			since, stable = time.Now(), now
		}
		if held := time.Since(since); held < 1500*time.Millisecond {
			return fmt.Errorf("the ring has read the same for %v only", held)
		}
		return nil
	})
	return stable
}

// sameRing reports whether a and b list the same members, owners and
// handoffs.
func sameRing(a, b httpapi.Ring) bool {
	return a.Self == b.Self && reflect.DeepEqual(a.Members, b.Members) && reflect.DeepEqual(a.Zones, b.Zones) &&
		slices.Equal(a.Grace, b.Grace) && slices.Equal(a.Loading, b.Loading)
}

// domWhileStable loads page in the browser until /debug/ring reads as
// want after the page was drawn as well as before, so the page drew the
// ring want is.
func domWhileStable(t *testing.T, r *harness.Replica, want httpapi.Ring, page string) string {
	t.Helper()
	for attempt := 1; ; attempt++ {
		dom := dumpDOM(t, page)
		after, err := r.Ring(t)
		if err != nil {
			t.Fatal(err)
		}
		if sameRing(want, after) {
			return dom
		}
		if attempt == 3 {
			t.Fatalf("the ring kept changing while the page was read: %+v, then %+v", want, after)
		}
		want = stableRing(t, r, func(httpapi.Ring) error { return nil })
	}
}

// checkRingDOM fails t unless dom, the page drawn in the browser, shows
// every member of want with its state, every zone under each of its
// owners and nowhere else, and want's handoffs.
func checkRingDOM(t *testing.T, dom string, want httpapi.Ring) {
	t.Helper()
	doc := parseDOM(t, dom)
	main := findElement(doc, func(n *html.Node) bool { return n.Data == "main" })
	if state := attr(main, "data-state"); state != "ok" {
		t.Fatalf("the page's state is %q, want ok (read /debug/ring); banner: %q", state,
			textOf(findElement(doc, func(n *html.Node) bool { return attr(n, "id") == "error" })))
	}
	if n, _ := strconv.Atoi(attr(main, "data-fetches")); n < 2 {
		t.Errorf("the page read /debug/ring %d times, want it read again every 1.5 s", n)
	}
	members := map[string]*html.Node{}
	type chip struct{ zone, owner, primary string }
	chips := map[chip]int{}
	grace := map[string]bool{}
	handoffs := map[string]string{}
	walkDOM(doc, func(n *html.Node) {
		if name, ok := attrOK(n, "data-member"); ok {
			members[name] = n
		}
		if zone, ok := attrOK(n, "data-zone"); ok {
			if attr(n, "data-grace") == "true" {
				grace[zone] = true
			} else {
				chips[chip{zone, attr(n, "data-owner"), attr(n, "data-primary")}]++
			}
		}
		if zone, ok := attrOK(n, "data-handoff"); ok {
			handoffs[zone] = attr(n, "data-handoff-state")
		}
	})
	for _, m := range want.Members {
		n := members[m.Name]
		if n == nil {
			t.Errorf("member %q is not on the page", m.Name)
			continue
		}
		wantState := "owner"
		switch {
		case m.Down:
			wantState = "down"
		case m.Owner:
		case m.Pending:
			wantState = "pending"
		default:
			wantState = "cache"
		}
		if got := attr(n, "data-state"); got != wantState {
			t.Errorf("member %q shown %s, want %s", m.Name, got, wantState)
		}
		if m.Remote != "" && !strings.Contains(textOf(n), m.Remote) {
			t.Errorf("member %q is shown without its address %q: %q", m.Name, m.Remote, textOf(n))
		}
	}
	if len(members) != len(want.Members) {
		t.Errorf("the page shows %d members, /debug/ring lists %d", len(members), len(want.Members))
	}
	shown := 0
	for zone, owners := range want.Zones {
		for i, o := range owners {
			c := chip{zone, o, strconv.FormatBool(i == 0)}
			if chips[c] != 1 {
				t.Errorf("zone %q is shown %d times under owner %q (asked first: %s), want once", zone, chips[c], o, c.primary)
			}
			shown++
		}
	}
	if total := sumValues(chips); total != shown {
		t.Errorf("the page shows %d zones under owners, /debug/ring lists %d", total, shown)
	}
	for _, zone := range want.Grace {
		if !grace[zone] || handoffs[zone] != "grace" {
			t.Errorf("zone %q, in its grace period, is not shown as handed over (held: %v, handoff row: %q)", zone, grace[zone], handoffs[zone])
		}
	}
	for _, zone := range want.Loading {
		if handoffs[zone] != "loading" {
			t.Errorf("zone %q, loading, is not shown as loading (handoff row: %q)", zone, handoffs[zone])
		}
	}
	if len(grace) != len(want.Grace) || len(handoffs) != len(want.Grace)+len(want.Loading) {
		t.Errorf("the page shows %d zones in grace and %d handoffs, /debug/ring lists %v in grace and %v loading",
			len(grace), len(handoffs), want.Grace, want.Loading)
	}
}

func sumValues[K comparable](m map[K]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// serveRingAPI serves the real HTTP endpoints of a replica whose ring is
// ring on a loopback port; ringJSON, when set, answers /debug/ring in
// their place.
func serveRingAPI(t *testing.T, ring func() httpapi.Ring, ringJSON http.Handler) string {
	t.Helper()
	api := httpapi.New(httpapi.Config{Registry: promclient.NewRegistry(), Ready: func() bool { return true }, Ring: ring})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go api.Serve(l)
	t.Cleanup(func() { api.Close() })
	if ringJSON == nil {
		return l.Addr().String()
	}
	mux := http.NewServeMux()
	mux.Handle("/debug/ring", ringJSON)
	mux.Handle("/", httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: l.Addr().String()}))
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(front)
	t.Cleanup(func() { srv.Close() })
	return front.Addr().String()
}

// dumpDOM loads url in headless chromium, lets its script run for 4 s of
// virtual time (its timers, not the wall clock), and returns the DOM as
// it then is. The browser runs in a process group of its own with a
// profile of its own, and is killed, with every process it started,
// after 45 s at most. Nothing it does leaves this host: background
// networking, updates and sync are off.
func dumpDOM(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "chromium", "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-dev-shm-usage", "--user-data-dir="+t.TempDir(), "--no-first-run", "--no-default-browser-check",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--disable-default-apps", "--metrics-recording-only", "--virtual-time-budget=4000", "--dump-dom", url)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	start := time.Now()
	err := cmd.Run()
	if cmd.Process != nil {
		// Its zygote and utility processes may outlive the browser.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if err != nil {
		t.Fatalf("chromium --dump-dom %s: %v after %v\n%s", url, err, time.Since(start).Round(time.Millisecond), lastLines(stderr.String(), 20))
	}
	t.Logf("chromium drew %s in %v", url, time.Since(start).Round(time.Millisecond))
	return out.String()
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func parseDOM(t *testing.T, dom string) *html.Node {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(dom))
	if err != nil {
		t.Fatalf("the browser's DOM does not parse: %v", err)
	}
	return doc
}

// walkDOM calls f on n and every node under it.
func walkDOM(n *html.Node, f func(*html.Node)) {
	f(n)
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walkDOM(c, f)
	}
}

// findElement returns the first element under n that match accepts, or nil.
func findElement(n *html.Node, match func(*html.Node) bool) *html.Node {
	var found *html.Node
	walkDOM(n, func(c *html.Node) {
		if found == nil && c.Type == html.ElementNode && match(c) {
			found = c
		}
	})
	return found
}

func attrOK(n *html.Node, key string) (string, bool) {
	if n == nil || n.Type != html.ElementNode {
		return "", false
	}
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func attr(n *html.Node, key string) string {
	v, _ := attrOK(n, key)
	return v
}

// textOf is the text under n, as a reader sees it.
func textOf(n *html.Node) string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	walkDOM(n, func(c *html.Node) {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	})
	return b.String()
}
