package liveness

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shardns/shardns/internal/testutil"
)

// fakeNet answers dials with what each address is set to.
type fakeNet struct {
	mu      sync.Mutex
	answers map[string]error // nil: accepts; errBlock: waits for the deadline
	dials   atomic.Int32
}

var errBlock = fmt.Errorf("block")

func (f *fakeNet) set(addr string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[addr] = err
}

func (f *fakeNet) dial(ctx context.Context, addr string) error {
	f.dials.Add(1)
	f.mu.Lock()
	err := f.answers[addr]
	f.mu.Unlock()
	if err == errBlock {
		<-ctx.Done()
		return ctx.Err()
	}
	return err
}

// changes records Changed calls.
type changes struct {
	mu  sync.Mutex
	got []string
}

func (c *changes) record(member string, down bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, fmt.Sprintf("%s down=%v", member, down))
}

func (c *changes) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.got...)
}

func newChecker(t *testing.T, f *fakeNet, ch *changes, interval time.Duration) *Checker {
	t.Helper()
	c, err := New(Config{Dial: f.dial, Timeout: 50 * time.Millisecond, Interval: interval, Changed: ch.record})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

var refused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

// A member whose port refuses is down, once; it is up again as soon as
// its port accepts.
func TestRefusedMemberIsDownUntilItAccepts(t *testing.T) {
	f := &fakeNet{answers: map[string]error{"10.0.0.3:8090": refused}}
	ch := &changes{}
	c := newChecker(t, f, ch, 20*time.Millisecond)
	c.Suspect("r2", "10.0.0.3:8090")
	testutil.Eventually(t, 5*time.Second, func() error {
		if !c.Down("r2", "10.0.0.3:8090") {
			return fmt.Errorf("r2 not down")
		}
		return nil
	})
	if c.Down("r2", "10.0.0.4:8090") {
		t.Fatal("r2 is down at an address it never refused at")
	}
	f.set("10.0.0.3:8090", nil)
	testutil.Eventually(t, 5*time.Second, func() error {
		if c.Down("r2", "10.0.0.3:8090") {
			return fmt.Errorf("r2 still down")
		}
		return nil
	})
	if got := ch.list(); len(got) != 2 || got[0] != "r2 down=true" || got[1] != "r2 down=false" {
		t.Fatalf("changes %v, want down then up", got)
	}
}

// A member that is slow (its check times out) or that accepts is not
// down: with no question to it unanswered (or SilentAfter 0), only a
// refusal proves it gone.
func TestSlowOrServingMemberIsNotDown(t *testing.T) {
	f := &fakeNet{answers: map[string]error{"slow:1": errBlock, "up:1": nil,
		"unreachable:1": &net.OpError{Op: "dial", Net: "tcp", Err: syscall.EHOSTUNREACH}}}
	ch := &changes{}
	c := newChecker(t, f, ch, time.Hour)
	for _, m := range []string{"slow", "up", "unreachable"} {
		c.Suspect(m, m+":1")
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := f.dials.Load(); n != 3 {
			return fmt.Errorf("%d dials", n)
		}
		return nil
	})
	c.Close() // waits for the checks
	for _, m := range []string{"slow", "up", "unreachable"} {
		if c.Down(m, m+":1") {
			t.Errorf("%s is down", m)
		}
	}
	if got := ch.list(); len(got) != 0 {
		t.Fatalf("changes %v, want none", got)
	}
}

// A member is checked at most once per interval, however often it is
// suspected: a burst of failed questions costs one connection.
func TestSuspectIsRateLimited(t *testing.T) {
	now := time.Unix(1000, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	f := &fakeNet{answers: map[string]error{}}
	c, err := New(Config{Dial: f.dial, Timeout: time.Second, Interval: time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 100 {
		c.Suspect("r1", "10.0.0.2:8090")
	}
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	c.Suspect("r1", "10.0.0.2:8090")
	c.Suspect("", "")
	c.Suspect("r0", "")
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := f.dials.Load(); n != 2 {
			return fmt.Errorf("%d dials, want 2", n)
		}
		return nil
	})
}

// Gossip has the last word: a member it no longer lists, or lists at
// another address, is forgotten.
func TestRetainForgetsMembersGossipDropped(t *testing.T) {
	f := &fakeNet{answers: map[string]error{"a:1": refused, "b:1": refused}}
	c := newChecker(t, f, &changes{}, time.Hour)
	c.Suspect("a", "a:1")
	c.Suspect("b", "b:1")
	testutil.Eventually(t, 5*time.Second, func() error {
		if !c.Down("a", "a:1") || !c.Down("b", "b:1") {
			return fmt.Errorf("not both down")
		}
		return nil
	})
	c.Retain(map[string]string{"b": "b:2"})
	if c.Down("a", "a:1") || c.Down("b", "b:1") || c.Down("b", "b:2") {
		t.Fatal("a member gossip dropped or moved is still down")
	}
}

// Refused tells a closed port on a real socket from one that listens.
func TestRefusedOnLoopback(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	open := l.Addr().String()
	closedL, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := closedL.Addr().String()
	closedL.Close()
	defer l.Close()
	conn, err := net.Dial("tcp", open)
	if err != nil || Refused(err) {
		t.Fatalf("dial to a listening port: %v", err)
	}
	conn.Close()
	if _, err := net.Dial("tcp", closed); !Refused(err) {
		t.Fatalf("dial to a closed port: %v, want refused", err)
	}
	if Refused(nil) || Refused(context.DeadlineExceeded) {
		t.Fatal("nil or a timeout counted as refused")
	}
}

// A process being torn down can accept a connection and reset it before
// its port closes: the check tries again and finds the port refusing.
func TestResetThenRefusedIsDown(t *testing.T) {
	var dials atomic.Int32
	c, err := New(Config{Timeout: time.Second, Interval: time.Hour, Dial: func(context.Context, string) error {
		if dials.Add(1) == 1 {
			return &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
		}
		return refused
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Suspect("r2", "10.0.0.3:8090")
	testutil.Eventually(t, 5*time.Second, func() error {
		if !c.Down("r2", "10.0.0.3:8090") {
			return fmt.Errorf("r2 not down after %d dials", dials.Load())
		}
		return nil
	})
}

// A check that ends after gossip dropped the member does not bring it
// back as down.
func TestCheckEndingAfterRetainIsIgnored(t *testing.T) {
	release := make(chan struct{})
	c, err := New(Config{Timeout: time.Minute, Interval: time.Hour, Dial: func(context.Context, string) error {
		<-release
		return refused
	}})
	if err != nil {
		t.Fatal(err)
	}
	c.Retain(map[string]string{"r2": "10.0.0.3:8090"})
	c.Suspect("r2", "10.0.0.3:8090")
	c.Retain(map[string]string{})
	close(release)
	c.Close() // waits for the check
	if c.Down("r2", "10.0.0.3:8090") {
		t.Fatal("a member gossip dropped is down")
	}
}
