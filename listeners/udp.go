package listeners

import (
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
	// the system lets a socket set it (Linux; net.core.rmem_max caps it).
	// The usual default, 208 KiB, holds a few hundred queries; dnsperf's bursts
	// overflowed it at full load (a few dozen of 2 million queries lost
	// per 20 s, counted in the kernel's RcvbufErrors), and a burst of a
	// cluster's pods resolving at once is no different.
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
				t := query.Transport{IPv6: from.Addr().Is6() && !from.Addr().Is4In6(), Late: s, Client: from}
				resp = l.serve(req, t, b.bufs[answers])
			case query.Pending(req): // not a response, and long enough
				resp = formatError(req, b.bufs[answers])
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

// formatError appends to out[:0] the answer to a query that did not fit
// its slot: its header with QR and FORMERR and no sections, as the rest
// of a message cut short cannot be read.
func formatError(req, out []byte) []byte {
	out = append(out[:0], req[:4]...)
	out = append(out, make([]byte, 8)...)
	out[2] = 0x80 | (out[2] & 0x79) // QR; keep opcode and RD
	out[3] = dns.RcodeFormatError
	return out
}
