package main

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardns/shardns/httpapi"
)

// handoffRing is /debug/ring of replica a just after c joined: a hands
// shop over (grace), loads data, and b is found down; n is a node-local
// cache and p a replica still syncing.
const handoffRing = `{
 "self": "a",
 "members": [
  {"name": "a", "remote": "10.0.0.1:8090", "owner": true},
  {"name": "b", "remote": "10.0.0.2:8090", "owner": true, "down": true},
  {"name": "c", "remote": "10.0.0.3:8090", "owner": true},
  {"name": "n", "remote": "10.0.0.9:8090", "owner": false},
  {"name": "p", "remote": "10.0.0.4:8090", "owner": false, "pending": true}
 ],
 "zones": {
  "data.svc.cluster.local.": ["a", "c"],
  "default.svc.cluster.local.": ["c", "a"],
  "shop.svc.cluster.local.": ["c"],
  "10.96.10.in-addr.arpa.": ["a"]
 },
 "served": ["10.96.10.in-addr.arpa.", "data.svc.cluster.local.", "default.svc.cluster.local.", "shop.svc.cluster.local."],
 "replication": 2,
 "loading": ["data.svc.cluster.local."],
 "grace": ["shop.svc.cluster.local."]
}`

func decodeRing(t *testing.T, text string) httpapi.Ring {
	t.Helper()
	var r httpapi.Ring
	if err := json.Unmarshal([]byte(text), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func render(t *testing.T, r httpapi.Ring, style ringViewStyle) string {
	t.Helper()
	var b strings.Builder
	if err := renderRingView(&b, r, style); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// What an operator reads during a handoff: each member's role and
// state, a bar of its zones, the zones, and the handoffs this replica
// takes part in with where they go.
func TestRingViewDuringHandoff(t *testing.T) {
	got := render(t, decodeRing(t, handoffRing), ringViewStyle{Width: 100})
	want := `ring as seen by a: 5 members, 4 zones, replicationFactor 2, 2 handoffs in flight here
█ asked first  ▒ further owner  » held here in its grace period  + loading here

a (this replica)  replica, owner  remote 10.0.0.1:8090  3 zones, 2 asked first
  █▒+»
    █ 10.96.10.in-addr.arpa.  + data.svc.cluster.local.  ▒ default.svc.cluster.local.
    » shop.svc.cluster.local.

b  replica, down (its remote port refuses connections)  remote 10.0.0.2:8090  0 zones, 0 asked first

c  replica, owner  remote 10.0.0.3:8090  3 zones, 2 asked first
  ██▒
    ▒ data.svc.cluster.local.  █ default.svc.cluster.local.  █ shop.svc.cluster.local.

n  node-local cache, owns nothing  remote 10.0.0.9:8090  0 zones, 0 asked first

p  replica, syncing, not announced yet  remote 10.0.0.4:8090  0 zones, 0 asked first

handoffs in flight here
  » shop.svc.cluster.local.  lost, held through the grace  a -> c
  + data.svc.cluster.local.  gained, loading  c -> a
`
	if got != want {
		t.Errorf("shardns ring --view drew\n%s\nwant\n%s", got, want)
	}
}

var ansiRE = regexp.MustCompile("\x1b\\[[0-9;]*[A-Za-z]")

// On a terminal the same picture is coloured; without the colours it
// reads exactly as the plain one.
func TestRingViewColoursOnlyAdd(t *testing.T) {
	r := decodeRing(t, handoffRing)
	plain := render(t, r, ringViewStyle{Width: 100})
	coloured := render(t, r, ringViewStyle{Width: 100, Color: true})
	if coloured == plain {
		t.Fatal("the coloured picture has no colour")
	}
	if stripped := ansiRE.ReplaceAllString(coloured, ""); stripped != plain {
		t.Errorf("the coloured picture without its colours reads\n%s\nwant\n%s", stripped, plain)
	}
}

// A name holding terminal escapes is shown escaped: the picture sends
// no control character of its own to the terminal.
func TestRingViewEscapesNames(t *testing.T) {
	r := httpapi.Ring{Self: "a\x1b[2Jx", Members: []httpapi.Member{{Name: "a\x1b[2Jx", Owner: true}},
		Zones: map[string][]string{"evil\x1b]0;pwned\x07.example.": {"a\x1b[2Jx"}, "ok.example.": {"a\x1b[2Jx"}},
		Grace: []string{"gone\r\n.example."}, Replication: 1}
	got := render(t, r, ringViewStyle{Width: 100})
	if i := strings.IndexFunc(got, func(c rune) bool { return c < 0x20 && c != '\n' || c == 0x7f }); i >= 0 {
		t.Errorf("the picture sends control character %q to the terminal:\n%q", got[i], got)
	}
	for _, want := range []string{`a\x1b[2Jx (this replica)`, `evil\x1b]0;pwned\x07.example.`, `gone\x0d\x0a.example.`} {
		if !strings.Contains(got, want) {
			t.Errorf("the picture does not show %s escaped:\n%s", want, got)
		}
	}
}

// A replica with many zones (the reverse zones of a large cluster) gets
// a bar that fits the terminal, saying how many zones a cell stands for.
func TestRingViewBarsFit(t *testing.T) {
	r := httpapi.Ring{Self: "a", Members: []httpapi.Member{{Name: "a", Owner: true}, {Name: "b", Owner: true}},
		Zones: map[string][]string{}, Replication: 1}
	for i := range 1000 {
		owner := "a"
		if i%4 == 0 {
			owner = "b"
		}
		r.Zones[strings.Repeat("x", i%7)+string(rune('a'+i%26))+time.Duration(i).String()+".in-addr.arpa."] = []string{owner}
	}
	const width = 60
	got := render(t, r, ringViewStyle{Width: width})
	bars := 0
	for _, line := range strings.Split(got, "\n") {
		if strings.HasPrefix(line, "  █") {
			bars++
			if n := visibleWidth(line); n > width {
				t.Errorf("bar of %d columns on a %d-column terminal: %q", n, width, line)
			}
		}
	}
	if bars != 2 {
		t.Errorf("%d bars drawn, want one per member:\n%s", bars, got)
	}
	if !strings.Contains(got, "(a bar cell is 15 zones)") {
		t.Errorf("the picture does not say how many zones a cell is (750 on the longest bar, 52 cells):\n%s", got)
	}
}

// Watching: each read redraws the screen whole; a read that fails keeps
// the last picture under a line saying why; one ended by Ctrl-C draws
// nothing more.
func TestWatchRingKeepsLastPictureOnError(t *testing.T) {
	var out lockedBuffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	reads := 0
	read := func() (httpapi.Ring, error) {
		reads++
		switch reads {
		case 1:
			return decodeRing(t, handoffRing), nil
		case 4:
			cancel() // Ctrl-C during a read: nothing more is drawn
		}
		return httpapi.Ring{}, errors.New("10.0.0.1:8080/debug/ring: connection refused")
	}
	if err := watchRing(ctx, &out, time.Millisecond, read, func() int { return 100 }); err != nil {
		t.Fatal(err)
	}
	frames := strings.Split(out.String(), ansiHome)[1:]
	if len(frames) != 3 {
		t.Fatalf("%d frames drawn for 3 reads and one ended by Ctrl-C, want 3", len(frames))
	}
	second := ansiRE.ReplaceAllString(frames[1], "")
	if !strings.HasPrefix(second, "cannot read the ring: 10.0.0.1:8080/debug/ring: connection refused\nring as seen by a:") {
		t.Errorf("the frame after a failed read begins\n%.200s\nwant the error, then the last picture", second)
	}
	if !strings.Contains(second, "shop.svc.cluster.local.  lost, held through the grace  a -> c") {
		t.Errorf("the frame after a failed read lost the last picture:\n%s", second)
	}
}

// shardns ring refuses a negative --every rather than spinning.
func TestRingEveryNegative(t *testing.T) {
	err := ring([]string{"--view", "--every", "-1s"})
	if err == nil || !strings.Contains(err.Error(), "--every") {
		t.Fatalf("shardns ring --every -1s: %v, want an error naming --every", err)
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
