package liveness

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shardns/shardns/internal/testutil"
)

// silentChecker is a checker whose members go down after 2 s of silence
// and a check that times out, on a clock that stands still at now.
func silentChecker(t *testing.T, f *fakeNet, ch *changes, now time.Time) *Checker {
	t.Helper()
	c, err := New(Config{Dial: f.dial, Timeout: 20 * time.Millisecond, Interval: 20 * time.Millisecond,
		SilentAfter: 2 * time.Second, Changed: ch.record, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// A member that answered nothing for the silence and whose check times
// out (a network that drops what it is sent) is down; it is up again once
// a check completes.
func TestSilentMemberIsDownUntilACheckCompletes(t *testing.T) {
	now := time.Unix(1000, 0)
	f := &fakeNet{answers: map[string]error{"a:1": errBlock}}
	ch := &changes{}
	c := silentChecker(t, f, ch, now)
	c.Unanswered("r1", "a:1", now.Add(-3*time.Second))
	testutil.Eventually(t, 5*time.Second, func() error {
		if !c.Down("r1", "a:1") {
			return fmt.Errorf("r1 is not down")
		}
		return nil
	})
	f.set("a:1", nil) // healed: the next recheck completes
	testutil.Eventually(t, 5*time.Second, func() error {
		if got, want := ch.list(), []string{"r1 down=true", "r1 down=false"}; !slices.Equal(got, want) {
			return fmt.Errorf("changes %v, want %v", got, want)
		}
		return nil
	})
	if c.Down("r1", "a:1") {
		t.Fatal("r1 is still down")
	}
}

// What does not find a member down: questions unanswered but a check
// that completes (busy, not gone); a check that times out after a short
// silence; a silence that an answer ended.
func TestSilenceAloneOrATimeoutAloneIsNotDown(t *testing.T) {
	now := time.Unix(1000, 0)
	f := &fakeNet{answers: map[string]error{"busy:1": nil, "short:1": errBlock, "answering:1": errBlock}}
	ch := &changes{}
	c := silentChecker(t, f, ch, now)
	c.Unanswered("busy", "busy:1", now.Add(-time.Hour))
	c.Unanswered("short", "short:1", now.Add(-time.Second))
	c.Answered("answering", "answering:1")
	c.Unanswered("answering", "answering:1", now.Add(-time.Hour)) // asked before it answered
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := f.dials.Load(); n != 3 {
			return fmt.Errorf("%d dials", n)
		}
		return nil
	})
	c.Close() // waits for the checks
	for _, m := range []string{"busy", "short", "answering"} {
		if c.Down(m, m+":1") {
			t.Errorf("%s is down", m)
		}
	}
	if got := ch.list(); len(got) != 0 {
		t.Fatalf("changes %v, want none", got)
	}
}
