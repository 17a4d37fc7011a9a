package membership

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardns/shardns/internal/testutil"
)

// What a holder of the key can still tell the members, and what it
// changes: nothing, for a phantom at a member's address or the death of
// a member that serves.

var testKey = []byte("0123456789abcdef0123456789abcdef")

// keyed is cfg with the test key and the default label.
func keyed(cfg Config) Config {
	cfg.SecretKeys, cfg.Label = [][]byte{testKey}, "shardns"
	return cfg
}

// forgeDead sends to the gossip address to what only a holder of the key
// can: a packet saying, as from, that name is dead at incarnation inc
// (memberlist v0.7's deadMsg, msgpack-encoded, sealed as it seals a
// packet).
func forgeDead(t *testing.T, to, name, from string, inc uint32) {
	t.Helper()
	str := func(b []byte, s string) []byte { return append(append(b, 0xa0|byte(len(s))), s...) }
	msg := []byte{5, 0x83} // deadMsg, a map of three fields
	msg = append(str(msg, "Incarnation"), 0xce)
	msg = binary.BigEndian.AppendUint32(msg, inc)
	msg = str(str(msg, "Node"), name)
	msg = str(str(msg, "From"), from)
	block, err := aes.NewCipher(testKey)
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	nonce := make([]byte, gcm.NonceSize())
	rand.Read(nonce)
	sealed := gcm.Seal(append([]byte{1}, nonce...), nonce, msg, []byte("shardns"))
	packet := append([]byte{labelHeaderByte, byte(len("shardns"))}, "shardns"...)
	c, err := net.Dial("udp", to)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(append(packet, sealed...)); err != nil {
		t.Fatal(err)
	}
}

// absences records whether observer's view ever lacked member, from
// now until the test ends.
type absences struct {
	missing atomic.Int64
	done    chan struct{}
}

func watchFor(t *testing.T, observer *Membership, member string) *absences {
	a := &absences{done: make(chan struct{})}
	ch := observer.Subscribe()
	stop := make(chan struct{})
	go func() {
		defer close(a.done)
		for {
			select {
			case <-stop:
				return
			case _, ok := <-ch:
				if !ok {
					return
				}
			}
			if !strings.Contains(view(observer), member+"@") {
				a.missing.Add(1)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-a.done })
	return a
}

// servingStub answers Serving: yes for the names in serves; it counts
// the questions.
type servingStub struct {
	mu     sync.Mutex
	serves map[string]bool
	asked  []string
}

func (s *servingStub) serving(_ context.Context, m Member) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, m.Name)
	return s.serves[m.Name]
}

func (s *servingStub) wasAsked(name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.asked, name) {
		return fmt.Errorf("Serving asked about %q, not %s", s.asked, name)
	}
	return nil
}

// threeKeyed starts a, b and c with the key, a and c asking stub.
func threeKeyed(t *testing.T, stub *servingStub) (a, b, c *Membership) {
	withStub := func(cfg Config) Config { cfg.Serving = stub.serving; return keyed(cfg) }
	a = start(t, withStub(testConfig("a")))
	b = start(t, keyed(testConfig("b", a.LocalAddr())))
	c = start(t, withStub(testConfig("c", a.LocalAddr())))
	converge(t, 5*time.Second, []*Membership{a, b, c}, a, b, c)
	return a, b, c
}

// disputed reports whether m has settled every dispute it opened, and
// opened one.
func settledOne(m *Membership) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.disputes.next == 0 || len(m.disputes.gen) > 0 {
		return fmt.Errorf("%s: %d disputes opened, %d open", m.LocalName(), m.disputes.next, len(m.disputes.gen))
	}
	return nil
}

// A key holder declares b dead to a. b serves: a and c keep it while it
// refutes, and b never leaves their views.
func TestForgedDeathOfAServingMemberChangesNothing(t *testing.T) {
	t.Parallel()
	stub := &servingStub{serves: map[string]bool{"b": true}}
	a, b, c := threeKeyed(t, stub)
	seenByA, seenByC := watchFor(t, a, "b"), watchFor(t, c, "b")

	forgeDead(t, a.LocalAddr(), "b", "c", 1000)
	testutil.Eventually(t, 5*time.Second, func() error {
		if seenByA.missing.Load() > 0 {
			return nil // failed below
		}
		return stub.wasAsked("b")
	})
	converge(t, 5*time.Second, []*Membership{a, b, c}, a, b, c)
	if n, m := seenByA.missing.Load(), seenByC.missing.Load(); n+m > 0 {
		t.Fatalf("b was missing from a's view %d times, from c's %d times", n, m)
	}
	testutil.Eventually(t, 5*time.Second, func() error { return settledOne(a) }) // b refuted
}

// Without the remote port's word, gossip's stands: the member is dropped
// until it refutes (what a forged death did before).
func TestForgedDeathOfAMemberThatDoesNotServeDropsIt(t *testing.T) {
	t.Parallel()
	stub := &servingStub{}
	a, b, c := threeKeyed(t, stub)
	seenByA := watchFor(t, a, "b")

	forgeDead(t, a.LocalAddr(), "b", "c", 1000)
	testutil.Eventually(t, 5*time.Second, func() error {
		if seenByA.missing.Load() == 0 {
			return fmt.Errorf("a still sees b: %s", view(a))
		}
		return nil
	})
	converge(t, 5*time.Second, []*Membership{a, b, c}, a, b, c) // b refuted
}

// A member that serves but never refutes (it left, or another process
// serves its address now) is dropped after DeadNodeReclaimTime.
func TestMemberThatNeverRefutesIsDropped(t *testing.T) {
	t.Parallel()
	stub := &servingStub{serves: map[string]bool{"b": true}}
	a, b, c := threeKeyed(t, stub)
	if err := b.Leave(2 * time.Second); err != nil {
		t.Fatal(err)
	}
	converge(t, 5*time.Second, []*Membership{a, c}, a, c)
	if err := stub.wasAsked("b"); err != nil {
		t.Error(err)
	}
}

// An alive message naming another node at a member's address is
// ignored, counted as address-taken: the phantom never becomes a member.
func TestPhantomAtAMembersAddressIsRefused(t *testing.T) {
	t.Parallel()
	var seen refusalLog
	acfg := keyed(testConfig("a"))
	acfg.Rejected = seen.record
	a := start(t, acfg)
	b := start(t, keyed(testConfig("b", a.LocalAddr())))
	converge(t, 5*time.Second, []*Membership{a, b}, a, b)

	pcfg := keyed(testConfig("phantom", a.LocalAddr()))
	pcfg.Advertise = b.LocalAddr()
	start(t, pcfg)
	testutil.Eventually(t, 5*time.Second, func() error { return seen.has("phantom address-taken") })
	converge(t, 2*time.Second, []*Membership{a, b}, a, b)
}

// With AdmitSource, a stream from an address that is not a member, a
// seed or admitted is closed unread, counted as not-a-peer; once the
// address is admitted (the peers Service lists a new replica), its join
// goes through.
func TestStreamsOnlyFromAdmittedSources(t *testing.T) {
	t.Parallel()
	var seen refusalLog
	var published atomic.Bool
	joiner := netip.MustParseAddr("127.0.0.3")
	acfg := testConfig("a")
	acfg.Bind, acfg.Rejected = "127.0.0.2:0", seen.record
	acfg.AdmitSource = func(ip netip.Addr) bool { return published.Load() && ip == joiner }
	a := start(t, acfg)
	bcfg := testConfig("b", a.LocalAddr())
	bcfg.Bind = joiner.String() + ":0"
	b := start(t, bcfg)
	testutil.Eventually(t, 5*time.Second, func() error { return seen.has(" not-a-peer") })
	if got, want := view(a), expect(a); got != want {
		t.Errorf("a sees %q before b is admitted, want %q", got, want)
	}
	published.Store(true)
	converge(t, 5*time.Second, []*Membership{a, b}, a, b)
}

// A push/pull of members with the longest metadata and long names fits
// what a stream may deliver per member (maxNodeState each), with 512
// bytes for the rest of a keyed stream with a short label.
func TestPushPullOfLargeMembersFitsTheBudget(t *testing.T) {
	t.Parallel()
	const n = 6
	var seen refusalLog
	meta := []byte(strings.Repeat("m", 512))
	var nodes []*Membership
	for i := range n {
		cfg := keyed(testConfig(fmt.Sprintf("%03d-%s", i, strings.Repeat("n", 200))))
		if i > 0 {
			cfg.Seeds = []string{nodes[0].LocalAddr()}
		}
		cfg.Meta, cfg.Rejected = meta, seen.record
		// Room for n members and the dead one a rejoin may still list.
		cfg.Streams = StreamLimits{Bytes: (n+1)*maxNodeState + 512}
		nodes = append(nodes, start(t, cfg))
	}
	converge(t, 10*time.Second, nodes, nodes...)
	if len(seen.got) > 0 {
		t.Errorf("refused %q", seen.got)
	}
}
