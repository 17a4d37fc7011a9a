package dispatch

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
)

// droppingMailbox is a bounded mailbox that drops its oldest user message
// when full and counts each drop. It replaces protoactor's BoundedDropping,
// which offers no hook to count drops and keeps counting a dropped
// message as pending: after its first drop, its run loop never goes idle
// and holds a core for ever.
//
// It follows protoactor's default mailbox: system messages first, user
// messages while not suspended, a panic escalated to the supervisor. Both
// queues sit behind one mutex: a push or a pop holds it for a few loads and
// stores, far less than the remote reader and the actor spend per message.
type droppingMailbox struct {
	mu sync.Mutex
	// user is a ring grown as messages wait, up to limit: a ring of
	// its full size, 8192 pointers that every collection scans, cost
	// each of a replica's four dispatch mailboxes 128 KB of resident
	// heap whether or not a question ever waited in it.
	user      []any
	limit     int
	head, n   int   // oldest user message, user messages held
	system    []any // FIFO; few, and never dropped
	suspended bool

	running    atomic.Bool // a run loop is scheduled or running
	dropped    prometheus.Counter
	invoker    actor.MessageInvoker
	dispatcher actor.Dispatcher
}

// newDroppingMailbox returns the producer of mailboxes holding at most
// size user messages; dropped counts the messages they drop (nil: not
// counted).
func newDroppingMailbox(size int, dropped prometheus.Counter) actor.MailboxProducer {
	return func() actor.Mailbox {
		return &droppingMailbox{limit: size, dropped: dropped}
	}
}

// PostUserMessage queues msg, dropping the oldest message when full: the
// question it carried times out on the asking replica, which tries the
// next owner.
func (m *droppingMailbox) PostUserMessage(msg any) {
	m.mu.Lock()
	full := m.n == m.limit
	if full {
		m.user[m.head] = nil
		m.head = (m.head + 1) % len(m.user)
		m.n--
	}
	if m.n == len(m.user) {
		m.grow()
	}
	m.user[(m.head+m.n)%len(m.user)] = msg
	m.n++
	m.mu.Unlock()
	if full && m.dropped != nil {
		m.dropped.Inc()
	}
	m.schedule()
}

// grow doubles the ring (from 16, up to limit), oldest message first.
// It never shrinks: a replica that once had that many questions waiting
// may again.
func (m *droppingMailbox) grow() {
	user := make([]any, min(max(2*len(m.user), 16), m.limit))
	for i := range m.n {
		user[i] = m.user[(m.head+i)%len(m.user)]
	}
	m.user, m.head = user, 0
}

// PostSystemMessage queues a lifecycle message (start, stop, restart,
// watch...). These are never dropped.
func (m *droppingMailbox) PostSystemMessage(msg any) {
	m.mu.Lock()
	m.system = append(m.system, msg)
	m.mu.Unlock()
	m.schedule()
}

// RegisterHandlers implements actor.Mailbox.
func (m *droppingMailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
}

// Start implements actor.Mailbox.
func (m *droppingMailbox) Start() {}

// UserMessageCount is the number of user messages waiting.
func (m *droppingMailbox) UserMessageCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

func (m *droppingMailbox) schedule() {
	if m.running.CompareAndSwap(false, true) {
		m.dispatcher.Schedule(m.process)
	}
}

// process runs until both queues are empty (or only user messages wait
// while suspended), then goes idle; a message posted meanwhile finds the
// loop idle and schedules it again, or is seen by the check below.
func (m *droppingMailbox) process() {
	for {
		m.run()
		m.running.Store(false)
		if !m.hasWork() || !m.running.CompareAndSwap(false, true) {
			return
		}
	}
}

func (m *droppingMailbox) hasWork() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.system) > 0 || (!m.suspended && m.n > 0)
}

func (m *droppingMailbox) run() {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	for i, throughput := 0, m.dispatcher.Throughput(); ; i++ {
		if i > throughput {
			i = 0
			runtime.Gosched()
		}
		var system bool
		if msg, system = m.pop(); msg == nil {
			return
		}
		if system {
			m.invoker.InvokeSystemMessage(msg)
		} else {
			m.invoker.InvokeUserMessage(msg)
		}
	}
}

// pop returns the next message to handle: system messages first, user
// messages unless suspended; nil when there is none.
func (m *droppingMailbox) pop() (msg any, system bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for len(m.system) > 0 {
		msg = m.system[0]
		m.system[0] = nil
		m.system = m.system[1:]
		switch msg.(type) {
		case *actor.SuspendMailbox:
			m.suspended = true
		case *actor.ResumeMailbox:
			m.suspended = false
		default:
			return msg, true
		}
	}
	if m.suspended || m.n == 0 {
		return nil, false
	}
	msg = m.user[m.head]
	m.user[m.head] = nil
	m.head = (m.head + 1) % len(m.user)
	m.n--
	return msg, false
}
