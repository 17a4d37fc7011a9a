package membership

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardns/shardns/internal/testutil"
)

// refusalLog collects what Config.Rejected is told.
type refusalLog struct {
	mu  sync.Mutex
	got []string // "name reason"
}

func (r *refusalLog) record(addr, name, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, name+" "+reason)
}

func (r *refusalLog) has(want string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, g := range r.got {
		if strings.Contains(g, want) {
			return nil
		}
	}
	return fmt.Errorf("refusalLog %q, want one containing %q", r.got, want)
}

// A node Admit refuses never becomes a member of the nodes asking Admit,
// however often it joins them.
// notPeers admits every node but those it was told to refuse, which it
// refuses as not-a-peer and records; it may change while the nodes run.
type notPeers struct {
	mu      sync.Mutex
	refused map[string]bool
	seen    refusalLog
}

func (p *notPeers) refuse(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.refused == nil {
		p.refused = map[string]bool{}
	}
	p.refused[name] = true
}

// guard makes cfg's node admit through p.
func (p *notPeers) guard(cfg Config) Config {
	cfg.Admit = func(m Member) string {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.refused[m.Name] {
			return "not-a-peer"
		}
		return ""
	}
	cfg.Rejected = p.seen.record
	return cfg
}

func TestAdmitRefusesStranger(t *testing.T) {
	t.Parallel()
	var peers notPeers
	peers.refuse("stranger")
	seen := &peers.seen
	a := start(t, peers.guard(testConfig("a")))
	b := start(t, peers.guard(testConfig("b", a.LocalAddr())))
	converge(t, 5*time.Second, []*Membership{a, b}, a, b)

	start(t, testConfig("stranger", a.LocalAddr(), b.LocalAddr()))
	testutil.Eventually(t, 5*time.Second, func() error { return seen.has("stranger not-a-peer") })
	// Several rejoin rounds of the stranger later, the members still see
	// only each other.
	testutil.Eventually(t, 5*time.Second, func() error {
		seen.mu.Lock()
		n := len(seen.got)
		seen.mu.Unlock()
		if n < 3 {
			return fmt.Errorf("%d refusalLog so far", n)
		}
		return nil
	})
	for _, m := range []*Membership{a, b} {
		if got, want := view(m), expect(a, b); got != want {
			t.Errorf("%s sees %q, want %q", m.LocalName(), got, want)
		}
	}
}

// Gossip under another key is refused and reported as "key"; under
// another label as "label".
func TestRejectedGossipIsReported(t *testing.T) {
	t.Parallel()
	k1 := []byte("0123456789abcdef0123456789abcdef")
	k2 := []byte("fedcba9876543210")
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		reason string
	}{
		{"another key", func(c *Config) { c.SecretKeys = [][]byte{k2} }, "key"},
		{"no key", func(c *Config) { c.SecretKeys = nil }, "key"},
		{"another label", func(c *Config) { c.Label = "other" }, "label"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var seen refusalLog
			cfg := testConfig("a")
			cfg.SecretKeys, cfg.Label, cfg.Rejected = [][]byte{k1}, "shardns", seen.record
			a := start(t, cfg)
			scfg := testConfig("stranger", a.LocalAddr())
			scfg.SecretKeys, scfg.Label = [][]byte{k1}, "shardns"
			tc.mutate(&scfg)
			start(t, scfg)
			testutil.Eventually(t, 5*time.Second, func() error { return seen.has(" " + tc.reason) })
			if got, want := view(a), expect(a); got != want {
				t.Errorf("a sees %q, want only itself", got)
			}
		})
	}
}

// A key rotation: while both keys are installed everywhere, members
// using either one as their first key gossip with each other.
func TestKeyRotationKeepsOneCluster(t *testing.T) {
	t.Parallel()
	oldKey := []byte("0123456789abcdef0123456789abcdef")
	newKey := []byte("fedcba9876543210fedcba9876543210")
	keyed := func(cfg Config, keys ...[]byte) Config { cfg.SecretKeys = keys; return cfg }
	a := start(t, keyed(testConfig("a"), oldKey, newKey))
	b := start(t, keyed(testConfig("b", a.LocalAddr()), newKey, oldKey))
	converge(t, 5*time.Second, []*Membership{a, b}, a, b)
}

// RejoinNow runs a round at once: a member refused while its address was
// not yet admitted is joined as soon as the peers Service lists it, not a
// RejoinInterval later.
func TestRejoinNowRunsARound(t *testing.T) {
	t.Parallel()
	rounds := make(chan struct{}, 8)
	now := make(chan struct{}, 1)
	cfg := testConfig("a")
	cfg.RejoinInterval = time.Hour
	cfg.RejoinNow = now
	cfg.SeedsFunc = func(context.Context) ([]string, error) {
		rounds <- struct{}{}
		return nil, nil
	}
	start(t, cfg)
	<-rounds // the round of Start
	for range 2 {
		now <- struct{}{}
		select {
		case <-rounds:
		case <-time.After(5 * time.Second):
			t.Fatal("no rejoin round after RejoinNow")
		}
	}
}

// A replica that joins after another was removed, and is no longer a
// peer, still joins: the seed's state lists the removed one as dead or
// left, which is not a node asking to be admitted.
func TestJoinAfterAPeerWasRemoved(t *testing.T) {
	t.Parallel()
	var peers notPeers
	a := start(t, peers.guard(testConfig("a")))
	b := start(t, peers.guard(testConfig("b", a.LocalAddr())))
	converge(t, 5*time.Second, []*Membership{a, b}, a, b)
	if err := b.Leave(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	peers.refuse("b") // its address left the peers Service
	converge(t, 5*time.Second, []*Membership{a}, a)

	// The join itself succeeds: c knows a once Start returns, not only
	// after a later push/pull from a.
	c := start(t, peers.guard(testConfig("c", a.LocalAddr())))
	if got, want := view(c), expect(a, c); got != want {
		t.Fatalf("right after its join c sees %q, want %q", got, want)
	}
	converge(t, 5*time.Second, []*Membership{a, c}, a, c)
}
