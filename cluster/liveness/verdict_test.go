package liveness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want outcome
	}{
		{"completed", nil, serves},
		{"refused", refused, refuses},
		{"dial timed out", &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}, unreached},
		{"context deadline", fmt.Errorf("handshake: %w", context.DeadlineExceeded), unreached},
		{"host unreachable", &net.OpError{Op: "dial", Net: "tcp", Err: syscall.EHOSTUNREACH}, unreached},
		{"checker closing", context.Canceled, inconclusive},
		{"reset", syscall.ECONNRESET, inconclusive},
		{"handshake refused", errors.New("trust: key mismatch"), inconclusive},
	} {
		if got := outcomeOf(tc.err); got != tc.want {
			t.Errorf("%s: outcome %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestVerdict(t *testing.T) {
	const after = 2 * time.Second
	for _, tc := range []struct {
		name        string
		o           outcome
		silentFor   time.Duration
		silentAfter time.Duration
		down, known bool
	}{
		{"a completed check is up, however silent", serves, time.Hour, after, false, true},
		{"refused is down at once", refuses, 0, after, true, true},
		{"a timeout alone proves nothing", unreached, 0, after, false, false},
		{"a timeout after a short silence proves nothing", unreached, after - time.Millisecond, after, false, false},
		{"a timeout after the silence is down", unreached, after, after, true, true},
		{"silence is not looked at when off", unreached, time.Hour, 0, false, false},
		{"inconclusive proves nothing", inconclusive, time.Hour, after, false, false},
	} {
		down, known := verdict(tc.o, tc.silentFor, tc.silentAfter)
		if down != tc.down || known != tc.known {
			t.Errorf("%s: down %t known %t, want down %t known %t", tc.name, down, known, tc.down, tc.known)
		}
	}
}

func TestSilence(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	type step struct {
		op     string // "unanswered", "answered" or "retain"
		member string
		addr   string
		at     float64
	}
	for _, tc := range []struct {
		name  string
		steps []step
		now   float64
		want  time.Duration // silentFor("r1", "a:1")
	}{
		{"never asked", nil, 5, 0},
		{"from the first unanswered question", []step{{"unanswered", "r1", "a:1", 1}, {"unanswered", "r1", "a:1", 2}}, 4, 3 * time.Second},
		{"an earlier question reported later", []step{{"unanswered", "r1", "a:1", 2}, {"unanswered", "r1", "a:1", 1}}, 4, 3 * time.Second},
		{"an answer ends it", []step{{"unanswered", "r1", "a:1", 1}, {"answered", "r1", "a:1", 2}}, 4, 0},
		{"and starts it again at the next unanswered", []step{{"unanswered", "r1", "a:1", 1}, {"answered", "r1", "a:1", 2},
			{"unanswered", "r1", "a:1", 3}}, 4, time.Second},
		{"a question asked before the last answer proves nothing", []step{{"answered", "r1", "a:1", 2},
			{"unanswered", "r1", "a:1", 1}}, 4, 0},
		{"another address starts afresh", []step{{"unanswered", "r1", "b:1", 1}}, 4, 0},
		{"another member's silence is its own", []step{{"unanswered", "r2", "a:1", 1}}, 4, 0},
		{"gossip dropped the member", []step{{"unanswered", "r1", "a:1", 1}, {"retain", "r2", "a:1", 0}}, 4, 0},
		{"gossip kept the member", []step{{"unanswered", "r1", "a:1", 1}, {"retain", "r1", "a:1", 0}}, 4, 3 * time.Second},
	} {
		s := silence{}
		for _, st := range tc.steps {
			switch st.op {
			case "unanswered":
				s.unanswered(st.member, st.addr, at(st.at))
			case "answered":
				s.answered(st.member, st.addr, at(st.at))
			case "retain":
				s.retain(map[string]string{st.member: st.addr})
			}
		}
		if got := s.silentFor("r1", "a:1", at(tc.now)); got != tc.want {
			t.Errorf("%s: silent for %v, want %v", tc.name, got, tc.want)
		}
	}
}
