package listeners

import (
	"bytes"
	"net/netip"
	"runtime"
	"time"

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
	// udpYieldEvery is how often a busy reader passes through the Go
	// scheduler. A reader only enters and leaves system calls, so to
	// the runtime it is one goroutine running without end: every 10 ms
	// the sysmon thread sent its thread a preemption signal, took its
	// processor, and after each time polled every 20 µs for a
	// millisecond, backing off from there; that was 15–19% of the
	// CPU of a replica answering a static zone, at full load and at
	// 20k q/s (perf record). Yielding more often than sysmon's 10 ms
	// keeps it asleep. Each yield hands the reader to another thread
	// (about 17 µs), so not after every batch: at 20k q/s yielding after
	// each one took 24% of the CPU, once a millisecond 8%.
	udpYieldEvery = 5 * time.Millisecond
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
	yielded := time.Now() // when the reader last passed through the scheduler
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
		if now := time.Now(); now.Sub(yielded) > udpYieldEvery {
			yielded = now
			runtime.Gosched()
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
