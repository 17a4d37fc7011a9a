// Package trust decides which processes may take part in a shardns ring
// and what they may send: the gossip members a replica admits, the
// connections and messages its actor remote port accepts, and the record
// of everything it turned away.
//
// What a process may do follows from what it proves, never from what it
// announces. A replica proves it holds a replica key (memberlist's
// AES-GCM, and TLS on the remote port with a certificate derived from the
// key) and, in Kubernetes, that its address is an endpoint of the peers
// Service only the namespace's administrators can change; only such a
// process owns zones, answers questions and hands zones over. A
// node-local process proves it holds the node-local credential, derived
// from the replica keys but unable to give them back: it may ask
// questions and read the ring, nothing else, and it never gossips. Every
// message is checked against the routes of the sender's role and must
// name only the sender's own actors before protoactor reads it.
package trust

import (
	"container/list"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// Reasons a process is turned away, the values of the reason label of
// shardns_cluster_rejected_members_total.
const (
	// ReasonNotPeer: the address is not an endpoint of the peers Service.
	ReasonNotPeer = "not-a-peer"
	// ReasonRemoteAddress: the member advertises an actor remote address
	// on another host than its gossip address.
	ReasonRemoteAddress = "remote-address"
	// ReasonKey: gossip that the key does not decrypt, or that is not
	// encrypted at all.
	ReasonKey = "key"
	// ReasonLabel: gossip stamped with another cluster label.
	ReasonLabel = "label"
	// ReasonRemoteConnection: a connection to the remote port from an
	// address that is not a member, or without the key's certificate.
	ReasonRemoteConnection = "remote-connection"
	// ReasonRemoteMessage: a peer sent the remote port something its role
	// may not send, or named another process's actor as the sender.
	ReasonRemoteMessage = "remote-message"
	// ReasonRemoteLimit: a connection beyond the remote port's limits
	// (per peer, in total, or handshakes in progress).
	ReasonRemoteLimit = "remote-limit"
	// ReasonRemoteQueue: a message to another process's remote port
	// dropped because what its address (or host) has queued is at its
	// bound: it does not take what it is sent.
	ReasonRemoteQueue = "remote-queue"
	// ReasonNotOwner: a member announced that it owns zones without being
	// an endpoint of the replicas' peers Service; it owns none.
	ReasonNotOwner = "not-an-owner"
	// ReasonGossipLimit: a gossip stream beyond the gossip port's limits
	// (streams read at once, per address or in all; its bytes, declared
	// or sent; its deadline). A stream from an address that is neither a
	// member, a seed nor a peers Service's endpoint is not-a-peer.
	ReasonGossipLimit = "gossip-limit"
	// ReasonAddressTaken: an alive message named another node at the
	// gossip address of a member (a phantom member).
	ReasonAddressTaken = "address-taken"
)

// Rejection is one kind of refused attempt from one address.
type Rejection struct {
	Addr   string    `json:"addr"`
	Name   string    `json:"name,omitempty"` // the node name it claimed, if any
	Reason string    `json:"reason"`
	Count  uint64    `json:"count"`
	Last   time.Time `json:"last"`
}

// maxRejections bounds the table: a flood from many addresses keeps the
// most recent ones and still counts every attempt in the metric.
const maxRejections = 256

// Rejections records refused attempts. Its methods are safe for
// concurrent use and never block for long: memberlist calls Record under
// its node lock.
type Rejections struct {
	now     func() time.Time
	counted func(reason string) // the metric; nil: none
	log     *slog.Logger

	mu     sync.Mutex
	byID   map[rejectionID]*list.Element // of *Rejection, most recent first
	recent *list.List
	// Logging is bounded too: spoofed UDP gossip can come from any
	// number of addresses, each new to the table.
	logWindow time.Time // start of the current minute of logging
	logged    int       // lines logged in it
	unlogged  int       // new rejections not logged in it
}

// maxLogsPerMinute bounds the rejections logged one by one; the rest of
// a minute's are summed up in one line at the next one logged.
const maxLogsPerMinute = 20

type rejectionID struct{ addr, reason string }

// NewRejections returns an empty record. counted, if not nil, is called
// once per refused attempt (a Prometheus counter's Inc); the first attempt
// from each address for each reason is logged to log (a stranger retries
// every few seconds: the count says how often); now is the clock.
func NewRejections(counted func(reason string), log *slog.Logger, now func() time.Time) *Rejections {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Rejections{now: now, counted: counted, log: log, byID: make(map[rejectionID]*list.Element), recent: list.New()}
}

// Record counts one refused attempt from addr (host or host:port; the
// port is dropped, as a peer's source ports change) for reason.
func (r *Rejections) Record(addr, name, reason string) {
	if r == nil {
		return
	}
	addr = hostOf(addr)
	if r.counted != nil {
		r.counted(reason)
	}
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	id := rejectionID{addr, reason}
	if el, ok := r.byID[id]; ok {
		e := el.Value.(*Rejection)
		e.Count++
		e.Last = now
		if name != "" {
			e.Name = name
		}
		r.recent.MoveToFront(el)
		return
	}
	if len(r.byID) >= maxRejections {
		oldest := r.recent.Back()
		r.recent.Remove(oldest)
		e := oldest.Value.(*Rejection)
		delete(r.byID, rejectionID{e.Addr, e.Reason})
	}
	r.byID[id] = r.recent.PushFront(&Rejection{Addr: addr, Name: name, Reason: reason, Count: 1, Last: now})
	r.logLocked(now, addr, name, reason)
}

// logLocked logs a new rejection, at most maxLogsPerMinute a minute.
func (r *Rejections) logLocked(now time.Time, addr, name, reason string) {
	if now.Sub(r.logWindow) >= time.Minute {
		if r.unlogged > 0 {
			r.log.Warn("more processes refused that are not members of this ring; their count is in "+
				"shardns_cluster_rejected_members_total, the most recent in /debug/ring", "unlogged", r.unlogged)
		}
		r.logWindow, r.logged, r.unlogged = now, 0, 0
	}
	if r.logged >= maxLogsPerMinute {
		r.unlogged++
		return
	}
	r.logged++
	r.log.Warn("refused a process that is not a member of this ring", "addr", addr, "name", name, "reason", reason)
}

// List returns the recorded rejections, most recent first.
func (r *Rejections) List() []Rejection {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	out := make([]Rejection, 0, len(r.byID))
	for el := r.recent.Front(); el != nil; el = el.Next() {
		out = append(out, *el.Value.(*Rejection))
	}
	r.mu.Unlock()
	slices.SortFunc(out, func(a, b Rejection) int {
		if c := b.Last.Compare(a.Last); c != 0 {
			return c
		}
		return strings.Compare(a.Addr+a.Reason, b.Addr+b.Reason)
	})
	return out
}

// hostOf drops a port from addr, keeping IPv6 hosts without brackets.
func hostOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		host := addr[:i]
		if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
			return host[1 : len(host)-1]
		}
		if !strings.Contains(host, ":") { // IPv4 or a name with a port
			return host
		}
	}
	return addr
}
