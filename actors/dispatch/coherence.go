package dispatch

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/cluster/wire"
)

// Caches are told, not timed. An owner notes, before it answers a
// question, that the asker is interested in the question's zone
// (interest.go); when the zone's snapshot changes, it tells every
// interested asker which names changed, in one ZoneChanged per asker per
// batch, sent after the snapshot is published. The asker's "invalidate"
// actor hands the changes to its process's record of what owners said
// (query.Freshness), which outdates every cached answer of those names
// stored before the word arrived. An answer is stored with the time its
// question was sent, so a word about a change published while the
// question was in flight outdates it too.
//
// Messages are numbered per asker within an owner process (epoch): an
// asker that sees a gap (a full mailbox, a connection lost) cannot know
// what it missed and forgets every cached answer (Lost). What the owner
// does not know (its interest table was lost with a restart, a new owner
// after a ring change) is covered by the asker forgetting everything on
// ring changes.

// InvalidateName is the actor, on every replica and node-local process,
// that takes owners' ZoneChanged.
const InvalidateName = "invalidate"

// Defaults of CoherenceConfig.
const (
	// MinInterestLife is the shortest an asker's interest lasts.
	MinInterestLife = 60 * time.Second
	// DefaultMaxInterest bounds the interest entries (about 100 bytes
	// each).
	DefaultMaxInterest = 256 << 10
	// DefaultBatch is how long published changes gather before askers are
	// told: one message per asker per batch, within a second of the change.
	DefaultBatch = 100 * time.Millisecond
)

// maxLabels is how many labels of one zone a message names; beyond it
// (a relist), every name of the zone.
const maxLabels = 256

// maxChangeBytes bounds the zone changes of one message, roughly.
const maxChangeBytes = 32 << 10

// CoherenceConfig configures StartCoherence.
type CoherenceConfig struct {
	// Life is how long an asker's interest in a zone lasts after its
	// last question: at least the longest TTL this process's answers
	// carry. MinInterestLife at least.
	Life time.Duration
	// MaxInterest bounds the interest entries; 0: DefaultMaxInterest.
	MaxInterest int
	// Batch is how long published changes gather; 0: DefaultBatch.
	Batch time.Duration
	// Apply is told the zone changes an owner sent (validated by the
	// caller); Lost, that a message from an owner was lost. Both run in
	// the invalidate actor and must not block.
	Apply func(changes []*wire.ZoneChange)
	Lost  func()
	Now   func() time.Time
	// Counters; any may be nil.
	Sent, Received, Gaps prometheus.Counter // ZoneChanged messages sent, received, found missing
	Interest             prometheus.Gauge   // interest entries
	InterestDropped      prometheus.Counter // entries dropped by the bound
	MailboxDropped       prometheus.Counter // of the invalidate actor
}

// Coherence is a process's side of the protocol: the owner's interest
// table and notifier, and the asker's invalidate actor.
type Coherence struct {
	cfg      CoherenceConfig
	system   *actor.ActorSystem
	interest *interest
	epoch    uint64

	mu      sync.Mutex
	pending map[string]*wire.ZoneChange // by zone key, since the last flush
	seq     map[string]uint64           // by asker: the last message's number

	heard   map[uint64]heard // by owner epoch; the invalidate actor's alone
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	stopped atomic.Bool
}

// heard is the last message an asker took from one owner process.
type heard struct {
	seq uint64
	at  time.Time
}

// StartCoherence starts c's side of the protocol on system: the
// invalidate actor, and the notifier that tells askers what changed.
// From then on c's questions ask to be told, and its server notes who
// asked. Stop ends the notifier.
func (c *Client) StartCoherence(cfg CoherenceConfig) (*Coherence, error) {
	if cfg.Apply == nil || cfg.Lost == nil || cfg.Now == nil {
		return nil, errors.New("dispatch: coherence needs Apply, Lost and Now")
	}
	cfg.Life = max(cfg.Life, MinInterestLife)
	if cfg.MaxInterest <= 0 {
		cfg.MaxInterest = DefaultMaxInterest
	}
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	co := &Coherence{cfg: cfg, system: c.system,
		epoch: binary.LittleEndian.Uint64(b[:]) | 1, pending: map[string]*wire.ZoneChange{}, seq: map[string]uint64{},
		heard: map[uint64]heard{}, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	co.interest = newInterest(cfg.Life, cfg.MaxInterest, cfg.Now, func() {
		if cfg.InterestDropped != nil {
			cfg.InterestDropped.Inc()
		}
		co.wake() // its asker is told soon
	})
	props := actor.PropsFromFunc(co.receive, actor.WithMailbox(newDroppingMailbox(mailboxSize, cfg.MailboxDropped)))
	if _, err := c.system.Root.SpawnNamed(props, InvalidateName); err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	c.server.interest.Store(co.interest)
	c.coherent.Store(true)
	go co.run()
	return co, nil
}

// Stop ends the notifier and waits for it; nil does nothing.
func (co *Coherence) Stop() {
	if co != nil && co.stopped.CompareAndSwap(false, true) {
		close(co.stop)
		<-co.done
	}
}

// Published takes what a zone actor published (zonemanager.Observer.Published)
// for the next batch. It never blocks.
func (co *Coherence) Published(p zonemanager.Published) {
	co.mu.Lock()
	ch := co.pending[p.Zone]
	if ch == nil {
		ch = &wire.ZoneChange{Zone: p.Zone}
		co.pending[p.Zone] = ch
	}
	ch.All = ch.All || p.All || len(ch.Labels)+len(p.Labels) > maxLabels
	if ch.All {
		ch.Labels = nil
	} else {
		for _, l := range p.Labels {
			if !slices.Contains(ch.Labels, l) {
				ch.Labels = append(ch.Labels, l)
			}
		}
	}
	if t := p.Trigger.UnixNano(); !p.Trigger.IsZero() && (ch.TriggerUnixNano == 0 || t < ch.TriggerUnixNano) {
		ch.TriggerUnixNano = t
	}
	co.mu.Unlock()
	co.wake()
}

func (co *Coherence) wake() {
	select {
	case co.kick <- struct{}{}:
	default:
	}
}

// run flushes a batch Batch after the first change of it, and expires
// interest now and then.
func (co *Coherence) run() {
	defer close(co.done)
	sweep := time.NewTicker(co.cfg.Life / 4)
	defer sweep.Stop()
	for {
		select {
		case <-co.stop:
			return
		case <-sweep.C:
			co.expire()
			continue
		case <-co.kick:
		}
		select {
		case <-co.stop:
			return
		case <-time.After(co.cfg.Batch):
		}
		co.flush()
	}
}

// expire drops interest past its life, and the message numbers of askers
// left with none: every answer this process gave them has expired, so
// their numbering starts again at 1.
func (co *Coherence) expire() {
	live := co.interest.expire(co.cfg.Now())
	co.setInterest()
	co.mu.Lock()
	defer co.mu.Unlock()
	for asker := range co.seq {
		if !live[asker] {
			delete(co.seq, asker)
		}
	}
}

func (co *Coherence) setInterest() {
	if co.cfg.Interest != nil {
		co.cfg.Interest.Set(float64(co.interest.len()))
	}
}

// flush tells every interested asker what changed in the zones it asked
// about since the last flush, and the askers whose interest the bound
// dropped that every name of those zones did.
func (co *Coherence) flush() {
	co.mu.Lock()
	pending := co.pending
	co.pending = map[string]*wire.ZoneChange{}
	co.mu.Unlock()
	now := co.cfg.Now()
	byAsker := map[string][]*wire.ZoneChange{}
	for zone, ch := range pending {
		for _, asker := range co.interest.askers(zone, now) {
			byAsker[asker] = append(byAsker[asker], ch)
		}
	}
	for asker, zones := range co.interest.takeEvicted() {
		for _, zone := range zones {
			byAsker[asker] = append(byAsker[asker], &wire.ZoneChange{Zone: zone, All: true})
		}
	}
	for asker, changes := range byAsker {
		for _, part := range split(changes) {
			co.send(asker, part)
		}
	}
	co.setInterest()
}

// split cuts changes into the parts of messages of about maxChangeBytes.
func split(changes []*wire.ZoneChange) [][]*wire.ZoneChange {
	var parts [][]*wire.ZoneChange
	start, size := 0, 0
	for i, ch := range changes {
		n := len(ch.Zone) + 16
		for _, l := range ch.Labels {
			n += len(l) + 2
		}
		if size+n > maxChangeBytes && i > start {
			parts = append(parts, changes[start:i])
			start, size = i, 0
		}
		size += n
	}
	return append(parts, changes[start:])
}

// send sends asker the next numbered message with changes.
func (co *Coherence) send(asker string, changes []*wire.ZoneChange) {
	co.mu.Lock()
	co.seq[asker]++
	msg := &wire.ZoneChanged{Epoch: co.epoch, Seq: co.seq[asker], Changes: changes}
	co.mu.Unlock()
	co.system.Root.Send(actor.NewPID(asker, InvalidateName), msg)
	if co.cfg.Sent != nil {
		co.cfg.Sent.Inc()
	}
}

// receive is the invalidate actor: it applies what owners tell, and
// forgets everything when a message from one of them went missing.
func (co *Coherence) receive(ctx actor.Context) {
	msg, ok := ctx.Message().(*wire.ZoneChanged)
	if !ok {
		return
	}
	if co.cfg.Received != nil {
		co.cfg.Received.Inc()
	}
	now := co.cfg.Now()
	last, known := co.heard[msg.Epoch]
	co.heard[msg.Epoch] = heard{seq: msg.Seq, at: now}
	if len(co.heard) > 64 {
		co.forgetQuiet(now)
	}
	if msg.Seq != 1 && (!known || msg.Seq != last.seq+1) {
		// A message before this one never came: what it said is unknown.
		if co.cfg.Gaps != nil {
			co.cfg.Gaps.Inc()
		}
		co.cfg.Lost()
		return
	}
	co.cfg.Apply(msg.Changes)
}

// forgetQuiet drops the owner processes not heard from for a life: those
// that stopped, or that forgot this asker (and start at 1 again).
func (co *Coherence) forgetQuiet(now time.Time) {
	for epoch, h := range co.heard {
		if now.Sub(h.at) > co.cfg.Life {
			delete(co.heard, epoch)
		}
	}
}
