package dispatch

import (
	"crypto/rand"
	"encoding/binary"
	"sync"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
)

// Why a reply was dropped instead of delivered, the reason label of
// shardns_cluster_replies_dropped_total.
const (
	// DropUnknown: no question waits under the reply's id. A reply that
	// arrives after its question timed out, or a guess at an id.
	DropUnknown = "unknown-id"
	// DropSender: the reply did not come from the replica asked.
	DropSender = "sender"
	// DropMismatch: the reply does not echo the question it claims to
	// answer.
	DropMismatch = "mismatch"
)

// waiter is one question waiting for its reply.
type waiter[R any] struct {
	ch      chan R // buffered (1): delivering never blocks
	from    string // the remote address of the replica asked
	server  string // the name of the actor asked there
	answers func(R) bool
}

// pending holds the questions a replica waits on, each under an id no
// other process can predict: ids are drawn from crypto/rand, so that a
// member that was not asked cannot answer in the place of the one that
// was (a counter let any member answer every question in flight). A reply
// is delivered only if it comes from the actor asked, on the replica
// asked, and echoes the question; anything else is dropped and counted.
type pending[R any] struct {
	waiting sync.Map // uint64 → *waiter[R]
	dropped *prometheus.CounterVec
}

func newPending[R any](dropped *prometheus.CounterVec) *pending[R] {
	return &pending[R]{dropped: dropped}
}

// add registers a question to server at from; answers tells whether a
// reply echoes it. It returns the question's id and the channel its reply
// arrives on; done must be called once the question is no longer waited
// for.
func (p *pending[R]) add(from, server string, answers func(R) bool) (id uint64, reply <-chan R) {
	w := &waiter[R]{ch: make(chan R, 1), from: from, server: server, answers: answers}
	for {
		id = randomID()
		if _, taken := p.waiting.LoadOrStore(id, w); !taken {
			return id, w.ch
		}
	}
}

// done forgets the question id.
func (p *pending[R]) done(id uint64) { p.waiting.Delete(id) }

// deliver hands r, which claims to answer id and was sent by sender, to
// its question, or drops it and counts why.
func (p *pending[R]) deliver(sender *actor.PID, id uint64, r R) {
	v, ok := p.waiting.Load(id)
	if !ok {
		p.drop(DropUnknown)
		return
	}
	w := v.(*waiter[R])
	switch {
	case sender == nil || sender.Address != w.from || sender.Id != w.server:
		p.drop(DropSender)
	case !w.answers(r):
		p.drop(DropMismatch)
	default:
		// LoadAndDelete: of two copies of one reply only the first is
		// delivered, and the buffered channel never fills.
		if _, ok := p.waiting.LoadAndDelete(id); ok {
			w.ch <- r
		}
	}
}

func (p *pending[R]) drop(reason string) {
	if p.dropped != nil {
		p.dropped.WithLabelValues(reason).Inc()
	}
}

// randomID is a random non-zero id.
func randomID() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
		if id := binary.LittleEndian.Uint64(b[:]); id != 0 {
			return id
		}
	}
}
