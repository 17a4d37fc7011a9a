package httpapi

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The ring's page is one HTML document that loads nothing from
// elsewhere, and whose policy lets its own inline script and style run
// and nothing else: a zone name that became markup could run no script.
func TestRingViewIsSelfContained(t *testing.T) {
	rec := ask(New(testConfig()), "/debug/ring/view", "127.0.0.1:40000", "127.0.0.1:8080")
	if rec.Code != 200 {
		t.Fatalf("/debug/ring/view = %d %q", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q, want text/html; charset=utf-8", ct)
	}
	page := rec.Body.String()
	// Attributes and CSS that load something: only the page's own
	// fragment (the SVG arrow marker) may be named. The script's one
	// request, new URL("../ring"), is /debug/ring on this server.
	for _, m := range regexp.MustCompile(`\b((?i:src|href)\s*=|url\()\s*["']?([^"')\s>]*)`).FindAllStringSubmatch(page, -1) {
		if !strings.HasPrefix(m[2], "#") {
			t.Errorf("the page loads %q (%s): it must be self-contained", m[2], m[0])
		}
	}
	for _, banned := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
		if strings.Contains(page, banned) {
			t.Errorf("the page's script uses %s: names from the cluster would be parsed as HTML", banned)
		}
	}
	policy := rec.Header().Get("Content-Security-Policy")
	for _, part := range []string{"default-src 'none'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(policy, part) {
			t.Errorf("Content-Security-Policy %q lacks %q", policy, part)
		}
	}
	for _, tag := range []string{"script", "style"} {
		if strings.Count(page, "<"+tag+">") != 1 {
			t.Fatalf("the page has %d <%s> elements, want 1: the policy allows one by its hash", strings.Count(page, "<"+tag+">"), tag)
		}
		body := page[strings.Index(page, "<"+tag+">")+len(tag)+2 : strings.Index(page, "</"+tag+">")]
		sum := sha256.Sum256([]byte(body))
		want := tag + "-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
		if !strings.Contains(policy, want) {
			t.Errorf("Content-Security-Policy %q does not allow the page's own %s (%s)", policy, tag, want)
		}
	}
	if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Error("no X-Content-Type-Options: nosniff")
	}
}

// /debug/ring's JSON only grew: a ring with no handoff and no pending
// member reads as before, with the replication factor beside it.
func TestRingJSONAdditive(t *testing.T) {
	quiet, err := json.Marshal(Ring{Self: "a", Members: []Member{{Name: "a", Remote: "127.0.0.1:8090", Owner: true}},
		Zones: map[string][]string{"shop.svc.cluster.local.": {"a"}}, Served: []string{"shop.svc.cluster.local."}, Replication: 2})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"self":"a","members":[{"name":"a","remote":"127.0.0.1:8090","owner":true}],` +
		`"zones":{"shop.svc.cluster.local.":["a"]},"served":["shop.svc.cluster.local."],"replication":2}`
	if string(quiet) != want {
		t.Errorf("a quiet ring reads\n%s\nwant\n%s", quiet, want)
	}
	busy, err := json.Marshal(Ring{Self: "a", Members: []Member{{Name: "b", Pending: true}},
		Loading: []string{"data.svc.cluster.local."}, Grace: []string{"shop.svc.cluster.local."},
		Rejected: []Rejection{{Addr: "10.0.0.9:7946", Reason: "key", Count: 1, Last: time.Unix(0, 0).UTC()}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range []string{`{"name":"b","owner":false,"pending":true}`, `"loading":["data.svc.cluster.local."]`,
		`"grace":["shop.svc.cluster.local."]`, `"rejected":[{"addr":"10.0.0.9:7946"`} {
		if !strings.Contains(string(busy), part) {
			t.Errorf("a ring in a handoff reads %s, without %s", busy, part)
		}
	}
}
