package membership

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardns/shardns/internal/testutil"
)

// TestMain fails the run if goroutines outlive the nodes that started
// them: every test closes its nodes, so the count must come back. A
// fuzzing run starts no node, and the fuzzing engine keeps goroutines of
// its own.
func TestMain(m *testing.M) {
	before := runtime.NumGoroutine()
	code := m.Run()
	if fuzz := flag.Lookup("test.fuzz"); code == 0 && (fuzz == nil || fuzz.Value.String() == "") {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<20)
			fmt.Fprintf(os.Stderr, "%d goroutines leaked:\n%s\n", n-before, buf[:runtime.Stack(buf, true)])
			code = 1
		}
	}
	os.Exit(code)
}

// testConfig is a node on loopback with a random port and fast timing.
func testConfig(name string, seeds ...string) Config {
	cfg := Config{
		NodeName:       name,
		Bind:           "127.0.0.1:0",
		Seeds:          seeds,
		RejoinInterval: 300 * time.Millisecond,
		Timing:         FastTiming(),
		Logger:         slog.New(slog.DiscardHandler),
	}
	if os.Getenv("MEMBERSHIP_DEBUG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).
			With("node", name)
	}
	return cfg
}

// start starts a node that the test closes at its end.
func start(t *testing.T, cfg Config) *Membership {
	t.Helper()
	m, err := Start(cfg)
	if err != nil {
		t.Fatalf("start %s: %v", cfg.NodeName, err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// view renders what m sees as "name@addr ..." for comparisons.
func view(m *Membership) string {
	var parts []string
	for _, mem := range m.Members() {
		parts = append(parts, mem.Name+"@"+mem.Addr)
	}
	return strings.Join(parts, " ")
}

// expect is the view every node in nodes should converge to.
func expect(nodes ...*Membership) string {
	sorted := slices.Clone(nodes)
	slices.SortFunc(sorted, func(a, b *Membership) int { return strings.Compare(a.LocalName(), b.LocalName()) })
	var parts []string
	for _, n := range sorted {
		parts = append(parts, n.LocalName()+"@"+n.LocalAddr())
	}
	return strings.Join(parts, " ")
}

// converge waits until every observer sees exactly members.
func converge(t *testing.T, timeout time.Duration, observers []*Membership, members ...*Membership) {
	t.Helper()
	want := expect(members...)
	testutil.Eventually(t, timeout, func() error {
		for _, o := range observers {
			if got := view(o); got != want {
				return fmt.Errorf("%s sees %q, want %q", o.LocalName(), got, want)
			}
		}
		return nil
	})
}

func TestSingleNodeNeedsNoSeeds(t *testing.T) {
	t.Parallel()
	a := start(t, testConfig("a"))
	if got, want := view(a), expect(a); got != want {
		t.Fatalf("members = %q, want %q", got, want)
	}
	ch := a.Subscribe()
	if err := a.Leave(time.Second); err != nil {
		t.Fatalf("leave alone: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if err := a.Leave(time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("leave after close = %v, want ErrClosed", err)
	}
	for range ch { // drains a pending signal, then ends: Close closed it
	}
	if _, ok := <-a.Subscribe(); ok {
		t.Fatal("Subscribe after Close returned an open channel")
	}
}

func TestThreeNodesJoinThroughSeeds(t *testing.T) {
	t.Parallel()
	cfgA := testConfig("a")
	cfgA.Meta = []byte("remote=127.0.0.1:8090 owner")
	a := start(t, cfgA)
	changed := a.Subscribe()
	began := time.Now()
	b := start(t, testConfig("b", a.LocalAddr()))
	c := start(t, testConfig("c", a.LocalAddr()))
	all := []*Membership{a, b, c}
	converge(t, 5*time.Second, all, all...)
	t.Logf("3 nodes converged in %v", time.Since(began))

	select {
	case <-changed:
	default:
		t.Error("a's subscriber got no signal for the joins")
	}
	for _, o := range []*Membership{b, c} {
		if got := string(o.Members()[0].Meta); got != string(cfgA.Meta) {
			t.Errorf("%s sees a's meta %q, want %q", o.LocalName(), got, cfgA.Meta)
		}
	}
}

func TestFailedNodeIsDropped(t *testing.T) {
	t.Parallel()
	a := start(t, testConfig("a"))
	b := start(t, testConfig("b", a.LocalAddr()))
	c := start(t, testConfig("c", a.LocalAddr()))
	converge(t, 5*time.Second, []*Membership{a, b, c}, a, b, c)

	if err := c.Close(); err != nil { // no Leave: a crash, as far as a and b can tell
		t.Fatal(err)
	}
	began := time.Now()
	converge(t, 5*time.Second, []*Membership{a, b}, a, b)
	t.Logf("failure detected in %v", time.Since(began))
}

func TestLeaveIsSeenBeforeFailureDetection(t *testing.T) {
	t.Parallel()
	// Suspicion alone would take 50 probe intervals (10 s): only the
	// leave message can remove c within the deadline below.
	slow := func(cfg Config) Config { cfg.Timing.SuspicionMult = 50; return cfg }
	a := start(t, slow(testConfig("a")))
	b := start(t, slow(testConfig("b", a.LocalAddr())))
	c := start(t, slow(testConfig("c", a.LocalAddr())))
	converge(t, 5*time.Second, []*Membership{a, b, c}, a, b, c)

	began := time.Now()
	if err := c.Leave(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	converge(t, 3*time.Second, []*Membership{a, b}, a, b)
	t.Logf("leave seen in %v", time.Since(began))
}

// restart starts a node named like old, at a different port.
func restart(t *testing.T, cfg Config, oldAddr string) *Membership {
	t.Helper()
	for range 5 {
		m := start(t, cfg)
		if m.LocalAddr() != oldAddr {
			return m
		}
		_ = m.Close() // the kernel handed out the same port again
	}
	t.Fatalf("could not get a port other than %s", oldAddr)
	return nil
}

func TestRestartedNodeReclaimsItsName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// waitDead: restart only once the others declared the old
		// address dead; otherwise restart at once, so the new address is
		// first rejected as a conflict and taken on a later rejoin.
		waitDead bool
	}{
		{name: "after failure detection", waitDead: true},
		{name: "before failure detection", waitDead: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := start(t, testConfig("a"))
			c := start(t, testConfig("c", a.LocalAddr()))
			b := start(t, testConfig("b", a.LocalAddr()))
			converge(t, 5*time.Second, []*Membership{a, b, c}, a, b, c)

			oldAddr := b.LocalAddr()
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if tc.waitDead {
				converge(t, 5*time.Second, []*Membership{a, c}, a, c)
			}
			b2 := restart(t, testConfig("b", a.LocalAddr()), oldAddr)
			converge(t, 10*time.Second, []*Membership{a, b2, c}, a, b2, c)
		})
	}
}

func TestLabelsKeepClustersApart(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, ours, theirs string }{
		{"different labels", "blue", "green"},
		{"unlabelled node", "blue", ""},
		{"unlabelled cluster", "", "green"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			labelled := func(cfg Config, label string) Config { cfg.Label = label; return cfg }
			a := start(t, labelled(testConfig("a"), tc.ours))
			c := start(t, labelled(testConfig("c", a.LocalAddr()), tc.ours))
			x := start(t, labelled(testConfig("x", a.LocalAddr()), tc.theirs))
			converge(t, 5*time.Second, []*Membership{a, c}, a, c)

			if _, err := x.list.Join([]string{a.LocalAddr()}); err == nil {
				t.Fatalf("join across labels %q and %q succeeded", tc.theirs, tc.ours)
			}
			if got, want := view(x), expect(x); got != want {
				t.Errorf("x sees %q, want only itself", got)
			}
			if got, want := view(a), expect(a, c); got != want {
				t.Errorf("a sees %q, want %q", got, want)
			}
		})
	}
}

func TestEncryptionKeysMustMatch(t *testing.T) {
	t.Parallel()
	k1 := []byte("0123456789abcdef0123456789abcdef")
	k2 := []byte("fedcba9876543210")
	for _, tc := range []struct {
		name   string
		a, b   []byte
		joined bool
	}{
		{"same key", k1, k1, true},
		{"different keys", k1, k2, false},
		{"joiner without key", k1, nil, false},
		{"cluster without key", nil, k2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			keyed := func(cfg Config, key []byte) Config {
				if key != nil {
					cfg.SecretKeys = [][]byte{key}
				}
				return cfg
			}
			a := start(t, keyed(testConfig("a"), tc.a))
			b := start(t, keyed(testConfig("b", a.LocalAddr()), tc.b))
			if tc.joined {
				converge(t, 5*time.Second, []*Membership{a, b}, a, b)
				return
			}
			if _, err := b.list.Join([]string{a.LocalAddr()}); err == nil {
				t.Fatal("join with a mismatched key succeeded")
			}
			if got, want := view(a), expect(a); got != want {
				t.Errorf("a sees %q, want only itself", got)
			}
		})
	}
}

// partition cuts the network between nodes by name; see Config.blocked.
type partition struct {
	mu    sync.Mutex
	side  map[string]int    // node name → side; all 0 when healed
	names map[string]string // gossip address → node name
}

func newPartition() *partition {
	return &partition{side: map[string]int{}, names: map[string]string{}}
}

// node starts name behind the partition.
func (p *partition) node(t *testing.T, cfg Config) *Membership {
	cfg.blocked = func(addr string) bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.side[cfg.NodeName] != p.side[p.names[addr]]
	}
	m := start(t, cfg)
	p.mu.Lock()
	p.names[m.LocalAddr()] = cfg.NodeName
	p.mu.Unlock()
	return m
}

func (p *partition) isolate(name string) { p.mu.Lock(); p.side[name] = 1; p.mu.Unlock() }
func (p *partition) heal()               { p.mu.Lock(); clear(p.side); p.mu.Unlock() }

func TestRejoinHealsPartition(t *testing.T) {
	t.Parallel()
	p := newPartition()
	a := p.node(t, testConfig("a"))
	b := p.node(t, testConfig("b", a.LocalAddr()))
	c := p.node(t, testConfig("c", a.LocalAddr(), b.LocalAddr()))
	converge(t, 5*time.Second, []*Membership{a, b, c}, a, b, c)

	p.isolate("c")
	converge(t, 5*time.Second, []*Membership{a, b}, a, b)
	converge(t, 5*time.Second, []*Membership{c}, c)

	// memberlist alone never talks to a dead peer again; the seeds do.
	p.heal()
	began := time.Now()
	converge(t, 5*time.Second, []*Membership{a, b, c}, a, b, c)
	t.Logf("healed in %v", time.Since(began))
}

func TestSeedsFuncPullsRestartedNodeBack(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seeds []string
	cfgA := testConfig("a")
	calls := make(chan struct{}, 1)
	cfgA.SeedsFunc = func(ctx context.Context) ([]string, error) {
		select {
		case calls <- struct{}{}:
		default:
		}
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seeds), nil
	}
	a := start(t, cfgA)
	b := start(t, testConfig("b", a.LocalAddr()))
	converge(t, 5*time.Second, []*Membership{a, b}, a, b)
	select {
	case <-calls:
	default:
		t.Fatal("SeedsFunc was not called at start")
	}

	oldAddr := b.LocalAddr()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	converge(t, 5*time.Second, []*Membership{a}, a)

	// The new b knows no one; only a's rejoin can bring it back.
	b2 := restart(t, testConfig("b"), oldAddr)
	mu.Lock()
	seeds = []string{b2.LocalAddr()}
	mu.Unlock()
	converge(t, 5*time.Second, []*Membership{a, b2}, a, b2)
}

func TestCloseAbortsJoinOfSilentSeed(t *testing.T) {
	t.Parallel()
	// A seed that accepts the connection and never answers would hold
	// the join, and so Close, for TCPTimeout.
	silent, waiting := silentServer(t)
	cfg := testConfig("a")
	cfg.Timing.TCPTimeout = time.Minute
	cfg.RejoinInterval = time.Millisecond
	var calls atomic.Int32
	cfg.SeedsFunc = func(ctx context.Context) ([]string, error) {
		if calls.Add(1) == 1 {
			return nil, nil // Start's own round: do not hold Start
		}
		return []string{silent}, nil
	}
	a := start(t, cfg)
	<-waiting // the loop is inside a join, past its dial
	began := time.Now()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Fatalf("Close took %v", d)
	}
}

// silentServer accepts TCP connections on loopback, reads and never
// writes. got is closed once the first byte arrives: the joiner is then
// past its dial, waiting for an answer.
func silentServer(t *testing.T) (addr string, got <-chan struct{}) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	first := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				if _, err := c.Read(make([]byte, 1)); err == nil {
					once.Do(func() { close(first) })
				}
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String(), first
}
