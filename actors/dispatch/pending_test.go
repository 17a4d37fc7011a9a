package dispatch

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardns/shardns/cluster/wire"
)

// A reply reaches its question only from the actor asked, on the replica
// asked, echoing the question; every other reply is dropped and counted
// by why, and the question still waits for the real one.
func TestPendingDeliversOnlyTheAskedReply(t *testing.T) {
	const asked = "10.0.0.2:8090"
	question := &wire.ZoneQuery{Zone: "ns.svc.cluster.local.", Name: "web.ns.svc.cluster.local.", Qtype: 1}
	echo := func(name string) *wire.ZoneReply {
		return &wire.ZoneReply{Served: true, Zone: question.Zone, Name: name, Qtype: question.Qtype}
	}
	cases := []struct {
		name   string
		sender *actor.PID
		id     func(uint64) uint64
		reply  *wire.ZoneReply
		reason string // "" : delivered
	}{
		{"the asked replica's answer", actor.NewPID(asked, ServerName), same, echo(question.Name), ""},
		{"a guessed id", actor.NewPID(asked, ServerName), func(id uint64) uint64 { return id + 1 }, echo(question.Name), DropUnknown},
		{"another replica", actor.NewPID("10.0.0.3:8090", ServerName), same, echo(question.Name), DropSender},
		{"the asked host, another port", actor.NewPID("10.0.0.2:8091", ServerName), same, echo(question.Name), DropSender},
		{"another actor of the asked replica", actor.NewPID(asked, HandoffName), same, echo(question.Name), DropSender},
		{"no sender", nil, same, echo(question.Name), DropSender},
		{"another name", actor.NewPID(asked, ServerName), same, echo("db.ns.svc.cluster.local."), DropMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dropped := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dropped"}, []string{"reason"})
			p := newPending[*wire.ZoneReply](dropped)
			id, ch := p.add(asked, ServerName, func(r *wire.ZoneReply) bool {
				return r.Zone == question.Zone && r.Name == question.Name && r.Qtype == question.Qtype
			})
			defer p.done(id)
			p.deliver(tc.sender, tc.id(id), tc.reply)
			select {
			case got := <-ch:
				if tc.reason != "" {
					t.Fatalf("delivered %v, want it dropped as %s", got, tc.reason)
				}
			default:
				if tc.reason == "" {
					t.Fatal("the asked replica's reply was not delivered")
				}
				if n := counterValue(t, dropped.WithLabelValues(tc.reason)); n != 1 {
					t.Fatalf("dropped{reason=%q} = %v, want 1", tc.reason, n)
				}
				// The real reply still gets through.
				p.deliver(actor.NewPID(asked, ServerName), id, echo(question.Name))
				if len(ch) != 1 {
					t.Fatal("the real reply after a dropped one was not delivered")
				}
			}
		})
	}
}

func same(id uint64) uint64 { return id }

// Ids are not a sequence another member could follow: a thousand
// questions in flight at once share no id, and none is one more than the
// one before.
func TestPendingIDsAreUnpredictable(t *testing.T) {
	p := newPending[*wire.ZoneReply](nil)
	seen := map[uint64]bool{}
	var prev uint64
	for range 1000 {
		id, _ := p.add("a", ServerName, func(*wire.ZoneReply) bool { return true })
		if seen[id] || id == 0 || id == prev+1 {
			t.Fatalf("id %d after %d (seen before: %v)", id, prev, seen[id])
		}
		seen[id], prev = true, id
	}
}
