package listeners

import (
	"bytes"
	"net/netip"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/query"
)

const (
	// udpBatch is how many datagrams one system call reads or writes
	// where the system has recvmmsg and sendmmsg. Under load a reader
	// finds several waiting; when idle the read returns with the one
	// there is, so batching adds no latency.
	udpBatch = 16
	// udpSlot is the room for one request. Clients' queries are far
	// smaller (miekg/dns servers read 512 bytes); a longer datagram is
	// cut here and answered FORMERR rather than read in part.
	udpSlot = 4096
	// udpReceiveBuffer is the socket's receive buffer asked for where
	// the system lets a socket set it (Linux; net.core.rmem_max caps
	// it). The usual default, 208 KiB, holds a few hundred queries;
	// dnsperf's bursts overflowed it at full load (a few dozen of 2
	// million queries lost per 20 s, counted in the kernel's
	// RcvbufErrors), and a cluster's pods resolving at once are no
	// different.
	udpReceiveBuffer = 1 << 20
)

// serveUDP reads and answers datagrams until the socket closes.
func (l *listener) serveUDP() {
	s := l.sockets.UDP
	b := newUDPBatcher(s, query.MaxUDPSize)
	if b == nil {
		return
	}
	defer b.done()
	local := addrPort(s.LocalAddr())
	var late query.LateWriter = s
	if l.cfg.RRL != nil {
		late = &rrlLate{l: l, s: s}
	}
	for {
		n, err := b.read()
		if err != nil {
			if isClosed(err) {
				return
			}
			l.cfg.Logger.Warn("udp read", "err", err)
			continue
		}
		answers := 0
		for i := range n {
			req, truncated, from := b.request(i)
			if !from.IsValid() || l.rateLimited(from) {
				continue
			}
			var resp []byte
			switch {
			case !truncated:
				t := query.Transport{IPv6: from.Addr().Is6() && !from.Addr().Is4In6(), Late: late, Client: from, Server: local}
				resp = l.limitResponse(from.Addr(), l.serve(req, t, b.bufs[answers]))
			case query.Pending(req): // not a response, and long enough
				// The rest of a message cut short cannot be read.
				resp = query.AppendErrorReply(b.bufs[answers], req, dns.RcodeFormatError)
			}
			if resp == nil {
				continue
			}
			b.answer(answers, i, resp)
			answers++
		}
		if err := b.write(answers); err != nil && !isClosed(err) {
			l.cfg.Logger.Debug("udp write", "err", err)
		}
	}
}

// limitResponse applies response rate limiting to resp, an answer to
// client over UDP: resp itself, its slipped form, or nil to drop it.
func (l *listener) limitResponse(client netip.Addr, resp []byte) []byte {
	if l.cfg.RRL == nil || resp == nil {
		return resp
	}
	class, action := l.cfg.RRL.Decide(client, resp)
	if c := l.cfg.RRLCounters; c != nil && c[class][action] != nil {
		c[class][action].Inc()
	}
	switch action {
	case RRLDrop:
		return nil
	case RRLSlip:
		if b, ok := slipped(resp); ok {
			return b
		}
		return nil
	}
	return resp
}

// rrlLate applies response rate limiting to forwarded answers, which
// are written to UDP clients later, from the forwarder's goroutine.
type rrlLate struct {
	l *listener
	s *UDPSocket
}

func (w *rrlLate) WriteLate(resp []byte, to netip.AddrPort) {
	// The forwarder may keep resp: limit a copy.
	if resp = w.l.limitResponse(to.Addr(), bytes.Clone(resp)); resp != nil {
		w.s.WriteLate(resp, to)
	}
}
