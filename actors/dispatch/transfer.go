package dispatch

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/miekg/dns"

	"github.com/shardns/shardns/cluster/wire"
	"github.com/shardns/shardns/zone"
)

// TransferName is the actor that gives a namespace's part of a transfer
// of an external zone (a wire.ZoneQuery of type AXFR for
// zone.ExternalPartName) to the replica serving the transfer. It is an
// actor of its own so that the remote port's routes let replicas ask it
// and node-local processes not: a transfer is for the clients a
// replica's transfer ACL allows.
const TransferName = "dispatch-transfer"

// transferServer answers the parts of transfers.
type transferServer struct{ source Source }

func (s *transferServer) Receive(ctx actor.Context) {
	q, ok := ctx.Message().(*wire.ZoneQuery)
	if !ok || ctx.Sender() == nil {
		return
	}
	ctx.Request(ctx.Sender(), answerPart(s.source, q))
}

// answerPart is the reply to q: not served unless this replica holds the
// namespace's service zone q.Zone complete; SERVFAIL, with an extended
// error saying why, when the part does not fit one DNS message, since a
// part cut short would be a zone with records missing.
func answerPart(source Source, q *wire.ZoneQuery) *wire.ZoneReply {
	reply := &wire.ZoneReply{Id: q.Id, Zone: q.Zone, Name: q.Name, Qtype: q.Qtype}
	cfg, view := source()
	if cfg == nil || q.Qtype != uint32(dns.TypeAXFR) {
		return reply
	}
	rrs, held := zone.ExternalPartAt(cfg, view, q.Name)
	if !held {
		return reply
	}
	m := new(dns.Msg)
	m.SetQuestion(q.Name, dns.TypeAXFR)
	m.Response, m.Authoritative, m.Compress = true, true, true
	m.Answer = rrs
	b, err := m.Pack()
	if err == nil && len(b) > dns.MaxMsgSize {
		err = fmt.Errorf("namespace's part is %d bytes, over the %d of one message", len(b), dns.MaxMsgSize)
	}
	if err != nil {
		m.Answer, m.Rcode = nil, dns.RcodeServerFailure
		m.SetEdns0(dns.MinMsgSize, false)
		opt := m.IsEdns0()
		opt.Option = append(opt.Option, &dns.EDNS0_EDE{InfoCode: dns.ExtendedErrorCodeOther, ExtraText: err.Error()})
		if b, err = m.Pack(); err != nil {
			return reply
		}
	}
	reply.Served, reply.Msg = true, b
	return reply
}
