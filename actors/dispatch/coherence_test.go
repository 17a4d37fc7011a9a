package dispatch

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/cluster/trust"
	"github.com/shardns/shardns/cluster/wire"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/zone"
)

// testClock is a clock that moves only when told.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// An asker's interest in a zone lasts its life from its last question;
// beyond the bound a random entry goes, and its asker is to be told that
// every name of the zone changed.
func TestInterestExpiresAndIsBounded(t *testing.T) {
	clock := &testClock{now: time.Unix(1000, 0)}
	evicted := 0
	in := newInterest(time.Minute, 3, clock.Now, func() { evicted++ })
	in.note("a.svc.", "10.0.0.1:1")
	in.note("a.svc.", "10.0.0.2:1")
	clock.add(30 * time.Second)
	if added := in.note("a.svc.", "10.0.0.1:1"); added {
		t.Error("a second question made a second entry")
	}
	clock.add(40 * time.Second) // 10.0.0.2 asked 70 s ago, 10.0.0.1 40 s ago
	if got := in.askers("a.svc.", clock.Now()); !slices.Equal(got, []string{"10.0.0.1:1"}) {
		t.Errorf("askers %v, want the one that asked within the minute", got)
	}
	if live := in.expire(clock.Now()); len(live) != 1 || !live["10.0.0.1:1"] || in.len() != 1 {
		t.Errorf("after expiry: live askers %v, %d entries; want 10.0.0.1:1 alone", live, in.len())
	}
	for _, zone := range []string{"b.svc.", "c.svc.", "d.svc."} {
		in.note(zone, "10.0.0.3:1")
	}
	if in.len() != 3 || evicted != 1 {
		t.Fatalf("%d entries, %d evicted; want the bound of 3 and 1 evicted", in.len(), evicted)
	}
	dropped := in.takeEvicted()
	if n := len(dropped); n != 1 {
		t.Fatalf("evicted entries %v, want 1", dropped)
	}
	if in.takeEvicted() != nil {
		t.Error("evicted entries given twice")
	}
	in.unnote("d.svc.", "10.0.0.3:1")
	if got := in.askers("d.svc.", clock.Now()); len(got) != 0 {
		t.Errorf("unnoted entry still asks: %v", got)
	}
}

// told collects what an invalidate actor applied.
type told struct {
	mu      sync.Mutex
	changes []*wire.ZoneChange
	lost    int
}

func (t *told) apply(cs []*wire.ZoneChange) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.changes = append(t.changes, cs...)
}

func (t *told) forget() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lost++
}

func (t *told) state() ([]*wire.ZoneChange, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.changes), t.lost
}

// startCoherent is a process with the dispatch actors and coherence on
// one actor system without remote: it asks and tells itself.
func startCoherent(t *testing.T, source Source) (*actor.ActorSystem, *Client, *Coherence, *told) {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	t.Cleanup(system.Shutdown)
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dropped"}, []string{"mailbox"})
	replies := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "replies"}, []string{"reason"})
	c, err := Start(system, source, nil, Counters{MailboxDropped: dropped, RepliesDropped: replies})
	if err != nil {
		t.Fatal(err)
	}
	tl := &told{}
	co, err := c.StartCoherence(CoherenceConfig{Apply: tl.apply, Lost: tl.forget, Now: time.Now, Batch: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(co.Stop)
	return system, c, co, tl
}

const (
	partZone = "web.svc.cluster.local."
	partName = "service-with-a-long-name-00000.web.svc.cluster.local."
)

// An owner tells the process that asked about a zone what changed in it,
// with the earliest trigger; a zone nobody asked about is told to nobody.
func TestOwnerTellsAskerOfChanges(t *testing.T) {
	system, c, co, tl := startCoherent(t, partSource(1))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if m, _, err := c.Ask(ctx, system.Address(), partZone, partName, dns.TypeA, zone.Topology{}); err != nil || len(m.Answer) != 1 {
		t.Fatalf("asking the owner: %v %v", m, err)
	}
	trigger := time.Unix(1000, 5)
	co.Published(zonemanager.Published{Zone: "other.svc.cluster.local.", All: true})
	co.Published(zonemanager.Published{Zone: partZone, Labels: []string{"web"}, Trigger: trigger.Add(time.Second)})
	co.Published(zonemanager.Published{Zone: partZone, Labels: []string{"db", "web"}, Trigger: trigger})
	waitFor(t, func() bool { changes, _ := tl.state(); return len(changes) > 0 })
	changes, lost := tl.state()
	if len(changes) != 1 || lost != 0 {
		t.Fatalf("told %v, lost %d; want the one zone asked about", changes, lost)
	}
	ch := changes[0]
	if ch.Zone != partZone || ch.All || !slices.Equal(ch.Labels, []string{"web", "db"}) || ch.TriggerUnixNano != trigger.UnixNano() {
		t.Errorf("told %v, want %s labels [web db], trigger %d", ch, partZone, trigger.UnixNano())
	}
}

// An asker that finds a message from an owner missing forgets
// everything; numbers start again at 1 after the owner forgot it.
func TestAskerForgetsAllOnAGap(t *testing.T) {
	system, _, _, tl := startCoherent(t, partSource(1))
	pid := actor.NewPID(system.Address(), InvalidateName)
	change := []*wire.ZoneChange{{Zone: partZone, All: true}}
	for _, m := range []*wire.ZoneChanged{{Epoch: 7, Seq: 1, Changes: change}, {Epoch: 7, Seq: 2, Changes: change},
		{Epoch: 7, Seq: 4, Changes: change}, {Epoch: 7, Seq: 1, Changes: change}, {Epoch: 9, Seq: 3, Changes: change}} {
		system.Root.Send(pid, m)
	}
	waitFor(t, func() bool { c, lost := tl.state(); return len(c)+lost == 5 })
	if changes, lost := tl.state(); len(changes) != 3 || lost != 2 {
		t.Errorf("applied %d, lost %d; want 3 applied (1, 2, 1 again) and 2 gaps (4 after 2, 3 of a new owner)", len(changes), lost)
	}
}

// waitFor waits for cond, for at most 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, func() error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	})
}

// Owners' word of changes reaches replicas from replicas and plain-text
// peers, and node-local processes from replicas (and plain-text peers:
// a node-local process without keys cannot tell them apart); never from
// a node-local process.
func TestZoneChangedRoutes(t *testing.T) {
	msg := &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: &remote.MessageBatch{
		TypeNames: []string{"shardns.wire.v1.ZoneChanged"},
		Targets:   []*actor.PID{{Address: "10.0.0.1:8090", Id: InvalidateName}},
		Envelopes: []*remote.MessageEnvelope{{TypeId: 0, Target: 0, MessageData: []byte{}}}}}}
	for _, tc := range []struct {
		nodeLocal bool
		role      trust.Role
		accepted  bool
	}{
		{false, trust.RoleReplica, true},
		{false, trust.RoleUnproven, true},
		{false, trust.RoleNodeLocal, false},
		{true, trust.RoleReplica, true},
		{true, trust.RoleUnproven, true},
		{true, trust.RoleNodeLocal, false},
	} {
		err := trust.CheckMessage(msg, Routes(tc.nodeLocal)[tc.role], netip.MustParseAddr("10.0.0.7"))
		if (err == nil) != tc.accepted {
			t.Errorf("node-local %v, from role %v: err %v, want accepted %v", tc.nodeLocal, tc.role, err, tc.accepted)
		}
	}
}
