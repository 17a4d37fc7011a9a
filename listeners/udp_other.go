//go:build !linux

package listeners

import (
	"net"
	"net/netip"
)

// UDPSocket is a UDP socket read one datagram at a time through Go's
// network poller, where the system has no recvmmsg.
type UDPSocket struct{ *net.UDPConn }

func listenUDP(addr string, shared bool) (*UDPSocket, error) {
	if shared {
		return nil, errShared
	}
	c, err := net.ListenPacket("udp", addr)
	if err != nil {
		return nil, err
	}
	return &UDPSocket{c.(*net.UDPConn)}, nil
}

// WriteLate sends a forwarded answer to its client from the socket.
func (s *UDPSocket) WriteLate(resp []byte, to netip.AddrPort) { s.WriteToUDPAddrPort(resp, to) }

// udpBatcher reads and writes one datagram at a time.
type udpBatcher struct {
	s    *UDPSocket
	slot []byte
	n    int
	from netip.AddrPort
	resp []byte
	bufs [1][]byte
}

func newUDPBatcher(s *UDPSocket, answerSize int) *udpBatcher {
	return &udpBatcher{s: s, slot: make([]byte, udpSlot+1), bufs: [1][]byte{make([]byte, 0, answerSize)}}
}

func (b *udpBatcher) done() {}

func (b *udpBatcher) read() (int, error) {
	n, from, err := b.s.ReadFromUDPAddrPort(b.slot)
	if err != nil {
		return 0, err
	}
	b.n, b.from = n, from
	return 1, nil
}

func (b *udpBatcher) request(int) ([]byte, bool, netip.AddrPort) {
	return b.slot[:min(b.n, udpSlot)], b.n > udpSlot, b.from
}

func (b *udpBatcher) answer(_, _ int, resp []byte) {
	b.bufs[0] = resp[:0]
	b.resp = resp
}

func (b *udpBatcher) write(n int) error {
	if n == 0 {
		return nil
	}
	_, err := b.s.WriteToUDPAddrPort(b.resp, b.from)
	return err
}
