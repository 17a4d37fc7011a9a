package liveness

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"time"
)

// outcome is what one check of a member's remote port found.
type outcome uint8

const (
	// inconclusive: the check failed in a way that proves nothing about
	// the process (a handshake refused, the checker closing).
	inconclusive outcome = iota
	// serves: the member's process answered the check.
	serves
	// refuses: nothing listens on the port; the process is gone.
	refuses
	// unreached: nothing came back within the timeout, or the host is
	// unreachable: the member is slow, paused, or behind a network that
	// drops what it is sent.
	unreached
)

// outcomeOf classifies the error of one check.
func outcomeOf(err error) outcome {
	var ne net.Error
	switch {
	case err == nil:
		return serves
	case Refused(err):
		return refuses
	case errors.Is(err, context.Canceled):
		return inconclusive // the checker is closing
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &ne) && ne.Timeout(),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.ETIMEDOUT):
		return unreached
	}
	return inconclusive
}

// verdict is what a check's outcome proves about a member that has
// answered no question asked of it for silentFor: down is meaningful
// only when known. A check that completes proves the member up, however
// long its questions went unanswered (it is busy, not gone); a refused
// one proves it down. A check that times out proves it down only when
// its questions have gone unanswered for silentAfter as well: one of
// the two alone is a busy member, or a lost packet. silentAfter 0
// leaves silent members to gossip.
func verdict(o outcome, silentFor, silentAfter time.Duration) (down, known bool) {
	switch o {
	case serves:
		return false, true
	case refuses:
		return true, true
	case unreached:
		if silentAfter > 0 && silentFor >= silentAfter {
			return true, true
		}
	}
	return false, false
}

// silent is what a member at addr answered lately: since when the
// questions asked of it have gone unanswered (zero: they have not), and
// when it last answered.
type silent struct {
	addr              string
	since, lastAnswer time.Time
}

// silence keeps, per member, since when its questions go unanswered:
// the first question asked after its last answer (a question's, or a
// completed check's) that got none.
type silence map[string]silent

// at is member's entry at addr: a member at another address starts
// afresh.
func (s silence) at(member, addr string) silent {
	if cur, ok := s[member]; ok && cur.addr == addr {
		return cur
	}
	return silent{addr: addr}
}

// unanswered records that a question asked of member at addr at asked
// got no answer. One asked before the member last answered proves
// nothing: the member spoke after it.
func (s silence) unanswered(member, addr string, asked time.Time) {
	cur := s.at(member, addr)
	if asked.Before(cur.lastAnswer) || !cur.since.IsZero() && !asked.Before(cur.since) {
		return
	}
	cur.since = asked
	s[member] = cur
}

// answered records that member at addr answered at.
func (s silence) answered(member, addr string, at time.Time) {
	cur := s.at(member, addr)
	cur.since = time.Time{}
	if at.After(cur.lastAnswer) {
		cur.lastAnswer = at
	}
	s[member] = cur
}

// silentFor is how long member at addr has answered nothing at now.
func (s silence) silentFor(member, addr string, now time.Time) time.Duration {
	cur := s.at(member, addr)
	if cur.since.IsZero() {
		return 0
	}
	return now.Sub(cur.since)
}

// retain forgets the members not in live (member → address) at the
// address they were silent at.
func (s silence) retain(live map[string]string) {
	for m, cur := range s {
		if live[m] != cur.addr {
			delete(s, m)
		}
	}
}

// closed reports whether err is a connection that was accepted, then
// closed or reset before the other end spoke.
func closed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
