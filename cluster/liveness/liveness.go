// Package liveness finds members whose process is gone, or that this
// replica cannot reach, before gossip declares them dead.
//
// memberlist cannot tell a crashed member from a slow one: it suspects a
// member that misses a probe round and declares it dead only after a
// suspicion period (about 5 s with the LAN timing), so that a member that
// was merely busy can refute. A refused connection is not ambiguous: the
// member's host answered that nothing listens on the member's actor
// remote port, which its process opens before it joins and keeps until it
// exits. So a crash, an OOM kill or kill -9 is known at once to any
// replica that tries to reach the member.
//
// A member behind a network that drops what it is sent (a partition, one
// way or both) refuses nothing: its questions and checks time out. Either
// alone is a busy member or a lost packet, so it takes both: no question
// asked of the member answered for Config.SilentAfter (the caller tells
// Answered and Unanswered), and then a check that times out. A check
// that completes proves the member serves, however long its questions
// went unanswered; a member that is only slow keeps its zones (gossip
// decides about it).
//
// A Checker checks a member when there is a reason to (its connection
// broke, a question to it went unanswered, another replica asked for a
// zone it owns) and at most once per interval; a member found down is
// checked again every interval and is up again as soon as a check
// completes. What being down means is the caller's business (node: the
// member owns no zone in this replica's ring).
//
// The decisions are pure (verdict.go: outcomeOf, verdict, silence);
// the Checker only dials, keeps the state and reports changes.
package liveness

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"syscall"
	"time"

	"github.com/shardns/shardns/internal/ticker"
)

// Config configures a Checker.
type Config struct {
	// Dial connects to a member's actor remote address, completes the
	// handshake a dispatch would, waits for the member to speak and
	// closes the connection: nil means the member's process serves. An
	// error that is a refused connection means it is gone; one that is a
	// connection closed or reset before the member spoke is checked again
	// a moment later; any other proves nothing. Required.
	Dial func(ctx context.Context, addr string) error
	// Timeout bounds one check. A check that times out proves the member
	// down only after SilentAfter of unanswered questions.
	Timeout time.Duration
	// SilentAfter is how long a member's questions must have gone
	// unanswered (Unanswered, with no Answered since) before a check that
	// times out finds it down. 0: only a refused connection does.
	SilentAfter time.Duration
	// Interval is the least time between two checks of one member, and
	// how often a member found down is checked again.
	Interval time.Duration
	// Changed is told when a member is found down or up again. It is
	// called from the checker's goroutines and must not block.
	Changed func(member string, down bool)
	// Logger receives a line for each change; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Checker keeps the members found down. Its methods are safe for
// concurrent use.
type Checker struct {
	cfg  Config
	ctx  context.Context // ends at Close, aborting checks in flight
	stop context.CancelFunc
	wg   sync.WaitGroup

	foundDown chan struct{} // a member was found down: the rechecks start

	mu      sync.Mutex
	down    map[string]string    // member → the remote address it was found down at
	last    map[string]time.Time // member → when its last check began
	silence silence              // members whose questions go unanswered
	live    map[string]string    // the members of the last Retain; nil before it
	closed  bool
}

// New returns a Checker and starts the loop that checks down members
// again. Close stops it.
func New(cfg Config) (*Checker, error) {
	switch {
	case cfg.Dial == nil:
		return nil, errors.New("liveness: Dial is required")
	case cfg.Timeout <= 0 || cfg.Interval <= 0:
		return nil, errors.New("liveness: Timeout and Interval must be positive")
	case cfg.SilentAfter < 0:
		return nil, errors.New("liveness: SilentAfter must not be negative")
	}
	if cfg.Changed == nil {
		cfg.Changed = func(string, bool) {}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Checker{cfg: cfg, foundDown: make(chan struct{}, 1), down: map[string]string{}, last: map[string]time.Time{},
		silence: silence{}}
	c.ctx, c.stop = context.WithCancel(context.Background())
	c.wg.Go(c.recheckLoop)
	return c, nil
}

// Suspect checks member, whose actor remote listens at addr, in the
// background, unless it is already down at addr or was checked less than
// an interval ago. It never blocks.
func (c *Checker) Suspect(member, addr string) {
	if addr == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.cfg.Now()
	if c.closed || c.down[member] == addr || now.Sub(c.last[member]) < c.cfg.Interval {
		return
	}
	c.last[member] = now
	c.wg.Go(func() { c.check(member, addr) })
}

// Unanswered tells the checker that a question asked of member, whose
// actor remote listens at addr, at asked (by Config.Now's clock) got no
// answer within its timeout, and checks the member as Suspect does.
func (c *Checker) Unanswered(member, addr string, asked time.Time) {
	c.mu.Lock()
	c.silence.unanswered(member, addr, asked)
	c.mu.Unlock()
	c.Suspect(member, addr)
}

// Answered tells the checker that member, at addr, answered a question:
// it is not silent.
func (c *Checker) Answered(member, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.silence.answered(member, addr, c.cfg.Now())
}

// Down reports whether member was found down at addr: a member that
// comes back at another address is not.
func (c *Checker) Down(member, addr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.down[member]
	return ok && a == addr
}

// Retain forgets the members that are not in live (member → remote
// address) at the address they were found down at: gossip has declared
// them dead, or they came back elsewhere; checks that end later do not
// bring them back. The caller rebuilds what depends on Down after it, so
// Changed is not called.
func (c *Checker) Retain(live map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live = make(map[string]string, len(live))
	for m, addr := range live {
		c.live[m] = addr
	}
	for m, addr := range c.down {
		if live[m] != addr {
			delete(c.down, m)
		}
	}
	for m := range c.last {
		if _, ok := live[m]; !ok {
			delete(c.last, m)
		}
	}
	c.silence.retain(live)
}

// Close stops the checks and waits for them.
func (c *Checker) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.stop()
	c.wg.Wait()
}

// closedRetries and closedPause: a process being torn down may close the
// connections it served before its listening socket, so a check right
// after its connection broke can find the port accepting, then reset.
// Such a check is made again a moment later, when the port refuses.
const (
	closedRetries = 3
	closedPause   = 20 * time.Millisecond
)

// check dials member and records what it proves.
func (c *Checker) check(member, addr string) {
	o := outcomeOf(c.dial(addr))
	if o == inconclusive {
		return
	}
	c.mu.Lock()
	now := c.cfg.Now()
	if o == serves {
		c.silence.answered(member, addr, now)
	}
	silentFor := c.silence.silentFor(member, addr, now)
	down, known := verdict(o, silentFor, c.cfg.SilentAfter)
	was, wasDown := c.down[member]
	switch {
	case !known, c.live != nil && c.live[member] != addr:
		// Proves nothing, or gossip dropped the member (or moved it)
		// while it was checked.
		c.mu.Unlock()
		return
	case down && (!wasDown || was != addr):
		c.down[member] = addr
	case !down && wasDown && was == addr:
		delete(c.down, member)
	default:
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.report(member, addr, o, down, silentFor)
}

// dial checks addr once, and again a moment later while the connection
// is closed before the member spoke (closedRetries).
func (c *Checker) dial(addr string) error {
	for try := 0; ; try++ {
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.Timeout)
		err := c.cfg.Dial(ctx, addr)
		cancel()
		if !closed(err) || try == closedRetries {
			return err
		}
		select {
		case <-c.ctx.Done():
			return c.ctx.Err()
		case <-time.After(closedPause):
		}
	}
}

// report logs a change found by a check of member, starts the rechecks
// of a member found down and tells Changed.
func (c *Checker) report(member, addr string, o outcome, down bool, silentFor time.Duration) {
	switch {
	case !down:
		c.cfg.Logger.Info("liveness: a member found down serves again", "member", member, "remote", addr)
	case o == refuses:
		c.cfg.Logger.Warn("liveness: a member's remote port refuses connections; it owns no zone here until it serves again or gossip declares it dead",
			"member", member, "remote", addr)
	default:
		c.cfg.Logger.Warn("liveness: a member has answered nothing, nor has its remote port; it owns no zone here until a check completes or gossip declares it dead",
			"member", member, "remote", addr, "silent", silentFor.Round(time.Millisecond))
	}
	if down {
		select {
		case c.foundDown <- struct{}{}:
		default:
		}
	}
	c.cfg.Changed(member, down)
}

// recheckLoop checks every down member again each interval. While no
// member is down it sleeps: a ticker that found nobody to check once a
// second was a tenth of the wakeups of an idle replica of three.
func (c *Checker) recheckLoop() {
	ticker.WhileNeeded(c.ctx.Done(), c.foundDown, c.cfg.Interval, func() bool {
		c.mu.Lock()
		down := make(map[string]string, len(c.down))
		for m, a := range c.down {
			down[m] = a
			c.last[m] = c.cfg.Now()
		}
		c.mu.Unlock()
		for m, a := range down {
			c.check(m, a)
		}
		return len(down) > 0
	})
}

// Refused reports whether err is a connection refused: the host is up and
// nothing listens on the port.
func Refused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED)
}
