package listeners

import (
	"container/list"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// A gate bounds the messages a listener holds at once: the DNS over HTTPS
// requests in flight, or the TCP and TLS messages over smallMessage
// bytes, which a connection's read buffer does not take. A message takes a place as it starts to
// arrive and gives it back once answered. When every place is taken, a
// newcomer takes the place of the message that has been arriving the
// longest, whose reading is cut (its stream reset, its connection
// closed): a peer that trickles is displaced by the next message, while
// a client whose message comes whole stops arriving within a round trip
// and is never the oldest for long. Only when nothing held is still
// arriving (every place is being answered) is the newcomer refused.
// Waiting in a queue instead would hold the newcomer's stream and
// goroutine as long as a trickling peer chose, and a client would wait
// behind the attack rather than displace it.
type gate struct {
	mu       sync.Mutex
	limit    int
	held     int
	arriving list.List          // of *place, oldest first
	cuts     prometheus.Counter // messages cut to make room; may be nil
}

// place is one message's hold on a gate.
type place struct {
	elem   *list.Element // in arriving; nil once arrived or cut
	cut    func()
	wasCut bool
}

func newGate(limit int, cuts prometheus.Counter) *gate {
	return &gate{limit: max(limit, 1), cuts: cuts}
}

// enter takes a place for a message that starts to arrive; cut stops its
// reading, and is called with the gate locked while the message is still
// arriving. nil when every place is taken by a message being answered.
func (g *gate) enter(cut func()) *place {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held < g.limit {
		g.held++
	} else {
		oldest := g.arriving.Front()
		if oldest == nil {
			return nil
		}
		victim := g.arriving.Remove(oldest).(*place)
		victim.elem, victim.wasCut = nil, true // its place is the newcomer's
		victim.cut()
		if g.cuts != nil {
			g.cuts.Inc()
		}
	}
	p := &place{cut: cut}
	p.elem = g.arriving.PushBack(p)
	return p
}

// arrived marks p's message complete, so that it is no longer cut; false
// when it was cut first.
func (g *gate) arrived(p *place) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p.elem != nil {
		g.arriving.Remove(p.elem)
		p.elem = nil
	}
	return !p.wasCut
}

// leave gives p's place back; a message that was cut gave it already.
func (g *gate) leave(p *place) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if p.elem != nil {
		g.arriving.Remove(p.elem)
		p.elem = nil
	}
	if !p.wasCut {
		g.held--
	}
}

// inUse is the number of places taken.
func (g *gate) inUse() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held
}
