package node

import (
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/miekg/dns"
	"google.golang.org/protobuf/proto"

	"github.com/shardns/shardns/actors/dispatch"
	"github.com/shardns/shardns/cluster/trust"
	"github.com/shardns/shardns/cluster/wire"
)

// A node-local process's largest batch of questions, as protoactor builds
// it (writerBatch questions of the longest name there can be, every byte
// escaped, with the longest topology zone, to and from IPv6 addresses),
// fits in what replicas take from a node-local process.
func TestNodeLocalBatchFitsTheQuestionLimit(t *testing.T) {
	label := strings.Repeat(`\000`, 63)
	name := strings.Join([]string{label, label, label, strings.Repeat(`\000`, 61)}, ".") + "."
	if _, ok := dns.IsDomainName(name); !ok {
		t.Fatalf("%q is not a name", name)
	}
	q := &wire.ZoneQuery{Id: ^uint64(0), Zone: name, Name: name, Qtype: 65535, TopologyMode: 2,
		TopologyZone: strings.Repeat("z", 63)}
	data, err := proto.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	addr := "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"
	b := &remote.MessageBatch{
		TypeNames: []string{string(q.ProtoReflect().Descriptor().FullName()), "shardns.wire.v1.RingRequest"},
		Targets:   []*actor.PID{{Address: addr, Id: dispatch.ServerName}, {Address: addr, Id: dispatch.RingName}},
		Senders:   []*actor.PID{{Address: addr, Id: "dispatch-replies"}, {Address: addr, Id: "ring-replies"}},
	}
	for range writerBatch(true) {
		b.Envelopes = append(b.Envelopes, &remote.MessageEnvelope{MessageData: data, Sender: 2, Target: 1, TypeId: 1,
			TargetRequestId: ^uint32(0), SenderRequestId: ^uint32(0)})
	}
	size := proto.Size(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}})
	t.Logf("the largest question: %d bytes; a batch of %d: %d bytes", len(data), writerBatch(true), size)
	if size > trust.DefaultQuestionBytes {
		t.Fatalf("a node-local batch of %d bytes, over the %d replicas take", size, trust.DefaultQuestionBytes)
	}
}
