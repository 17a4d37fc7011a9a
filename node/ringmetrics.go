package node

import (
	"encoding/binary"
	"hash/fnv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardns/shardns/cluster"
)

// fingerprintBits keeps a ring's fingerprint within the integers a
// float64 holds exactly, so that equal rings show equal gauge values and
// PromQL's count_values groups them.
const fingerprintBits = 53

// ringFingerprint identifies what decides where every question goes:
// the replication factor and the members that own zones and are not
// found down. Processes with equal fingerprints route every zone alike;
// one that differs from the others for long sees another ring (a
// partition, a stale node-local feed, a member found down by it alone).
// Pending members and node-local caches own nothing, so they leave it
// unchanged.
func ringFingerprint(r *cluster.Ring) uint64 {
	h := fnv.New64a()
	var rf [8]byte
	binary.BigEndian.PutUint64(rf[:], uint64(int64(r.Replication)))
	h.Write(rf[:])
	for _, o := range r.Owners() { // sorted by name, as the ring's members
		h.Write([]byte(o))
		h.Write([]byte{0})
	}
	return h.Sum64() & (1<<fingerprintBits - 1)
}

// currentRing is the ring questions are routed by; outside a cluster,
// this process alone owning everything.
func (n *Node) currentRing() *cluster.Ring {
	if r := n.rings.Live(); r != nil {
		return r
	}
	return cluster.NewRing(n.name, []cluster.Member{{Name: n.name, Owner: true}}, 0)
}

// registerRingMetrics exports, read at scrape time, what lets an
// operator compare the rings of all processes and find one that cannot
// read it: its fingerprint and live owners, and in a node-local process
// when the replicas last told it the ring.
func (n *Node) registerRingMetrics() {
	n.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "shardns", Subsystem: "cluster",
		Name: "ring_hash", Help: "Fingerprint of the ring this process routes by (replication and live owners); " +
			"equal on every process that sees the same ring."},
		func() float64 { return float64(ringFingerprint(n.currentRing())) }))
	n.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "shardns", Subsystem: "cluster",
		Name: "ring_owners", Help: "Members of the ring that own zones and are not found down; at 0 no zone has a live owner here."},
		func() float64 { return float64(len(n.currentRing().Owners())) }))
	if !n.nodeLocal {
		return // a replica's ring comes from gossip, whose health cluster_members shows
	}
	registered := time.Now()
	n.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "shardns", Subsystem: "cluster",
		Name: "ring_read_timestamp_seconds", Help: "When a replica last told this node-local process the ring " +
			"(Unix time; the process's start until one has)."},
		func() float64 {
			if f := n.ringFeed(); f != nil {
				return float64(f.lastRead().UnixNano()) / 1e9
			}
			return float64(registered.UnixNano()) / 1e9
		}))
	n.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "shardns", Subsystem: "cluster",
		Name: "ring_read_failures_total", Help: "Polls of the ring that no replica answered (node-local processes)."},
		func() float64 {
			if f := n.ringFeed(); f != nil {
				return float64(f.failures())
			}
			return 0
		}))
}

// ringFeed is the node-local process's feed of the ring; nil before the
// cluster starts.
func (n *Node) ringFeed() *ringFeed {
	if c := n.cluster; c != nil {
		return c.feed
	}
	return nil
}
