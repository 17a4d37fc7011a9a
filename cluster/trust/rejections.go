// Package trust decides which processes may take part in a shardns ring
// and what they may send: the gossip members a replica admits, the
// connections and messages its actor remote port accepts, and the record
// of everything it turned away.
//
// A replica trusts a peer for two reasons only, both checked before the
// peer can change what is served: it proves it holds the deployment's
// gossip key (memberlist's AES-GCM, and TLS on the remote port with a
// certificate derived from the same key), and, in Kubernetes, its address
// is an endpoint of the peers Service that only the namespace's
// administrators can change. Everything a peer can send over the remote
// port is two protobuf message types addressed to two actors; anything
// else closes its stream before protoactor reads it.
package trust

import (
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
	// ReasonRemoteMessage: a member sent something other than a zone
	// question or answer to the remote port.
	ReasonRemoteMessage = "remote-message"
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

	mu   sync.Mutex
	byID map[rejectionID]*Rejection
}

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
	return &Rejections{now: now, counted: counted, log: log, byID: make(map[rejectionID]*Rejection)}
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
	if e, ok := r.byID[id]; ok {
		e.Count++
		e.Last = now
		if name != "" {
			e.Name = name
		}
		return
	}
	if len(r.byID) >= maxRejections {
		r.evictOldestLocked()
	}
	r.byID[id] = &Rejection{Addr: addr, Name: name, Reason: reason, Count: 1, Last: now}
	r.log.Warn("refused a process that is not a member of this ring", "addr", addr, "name", name, "reason", reason)
}

func (r *Rejections) evictOldestLocked() {
	var oldest rejectionID
	var at time.Time
	for id, e := range r.byID {
		if at.IsZero() || e.Last.Before(at) {
			oldest, at = id, e.Last
		}
	}
	delete(r.byID, oldest)
}

// List returns the recorded rejections, most recent first.
func (r *Rejections) List() []Rejection {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	out := make([]Rejection, 0, len(r.byID))
	for _, e := range r.byID {
		out = append(out, *e)
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
