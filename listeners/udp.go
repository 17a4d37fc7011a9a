package listeners

import (
	"net"
	"net/netip"
	"syscall"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"

	"github.com/shardns/shardns/query"
)

const (
	// udpBatch is how many datagrams one system call reads or writes.
	// Under load a reader finds several waiting; when idle the read
	// returns with the one there is, so batching adds no latency.
	udpBatch = 16
	// udpSlot is the room for one request. Clients' queries are far
	// smaller (miekg/dns servers read 512 bytes); a longer datagram is
	// cut here and answered FORMERR rather than read in part.
	udpSlot = 4096
)

// udpBatcher reads requests and writes answers a batch per system call
// (recvmmsg and sendmmsg on Linux, one message per call elsewhere). On
// loopback a write costs most of the CPU of an answer, so fewer calls
// are the larger part of what is left to win.
type udpBatcher struct {
	conn *ipv4.PacketConn // ReadBatch and WriteBatch work on either family
	in   []ipv4.Message   // requests; their buffers are reused
	out  []ipv4.Message   // answers of the current batch
	bufs [][]byte         // answers' buffers, reused across batches
}

func newUDPBatcher(conn *net.UDPConn) *udpBatcher {
	b := &udpBatcher{
		conn: ipv4.NewPacketConn(conn),
		in:   make([]ipv4.Message, udpBatch),
		out:  make([]ipv4.Message, udpBatch),
		bufs: make([][]byte, udpBatch),
	}
	slots := make([]byte, udpBatch*udpSlot)
	for i := range b.in {
		b.in[i].Buffers = [][]byte{slots[i*udpSlot : (i+1)*udpSlot : (i+1)*udpSlot]}
		b.out[i].Buffers = make([][]byte, 1)
		b.bufs[i] = make([]byte, 0, query.MaxUDPSize)
	}
	return b
}

// serveUDP reads and answers datagrams until the socket closes.
func (l *listener) serveUDP() {
	conn := l.sockets.UDP.(*net.UDPConn)
	late := udpLate{conn}
	b := newUDPBatcher(conn)
	for {
		n, err := b.conn.ReadBatch(b.in, 0)
		if err != nil {
			if isClosed(err) {
				return
			}
			l.cfg.Logger.Warn("udp read", "err", err)
			continue
		}
		answers := 0
		for i := range b.in[:n] {
			m := &b.in[i]
			addr, ok := m.Addr.(*net.UDPAddr)
			if !ok {
				continue
			}
			from := addr.AddrPort()
			if l.rateLimited(from) {
				continue
			}
			req := m.Buffers[0][:m.N]
			var resp []byte
			if m.Flags&syscall.MSG_TRUNC != 0 {
				if !query.Pending(req) {
					continue // a response, or too short to be a query
				}
				resp = formatError(req, b.bufs[answers])
			} else {
				t := query.Transport{IPv6: from.Addr().Is6() && !from.Addr().Is4In6(), Late: late, Client: from}
				resp = l.serve(req, t, b.bufs[answers])
			}
			if resp == nil {
				continue
			}
			b.bufs[answers] = resp[:0]
			b.out[answers].Buffers[0] = resp
			b.out[answers].Addr = addr
			answers++
		}
		l.writeUDP(b, answers)
	}
}

// writeUDP sends the first n answers of the batch. A write that fails
// (an unreachable client) is logged and skipped, and the rest still go.
func (l *listener) writeUDP(b *udpBatcher, n int) {
	for sent := 0; sent < n; {
		k, err := b.conn.WriteBatch(b.out[sent:n], 0)
		sent += k
		if err != nil {
			if isClosed(err) {
				return
			}
			l.cfg.Logger.Debug("udp write", "to", b.out[sent].Addr, "err", err)
			sent++
		}
	}
	for i := range b.out[:n] {
		b.out[i].Addr = nil // the client's address is not kept past its answer
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

// udpLate sends forwarded answers from the listener's socket.
type udpLate struct{ conn *net.UDPConn }

func (u udpLate) WriteLate(resp []byte, to netip.AddrPort) { u.conn.WriteToUDPAddrPort(resp, to) }
