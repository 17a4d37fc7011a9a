//go:build linux

package listeners

import (
	"encoding/binary"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// UDPSocket is a UDP socket kept out of Go's network poller. Its readers
// block in recvmmsg, each on a thread of its own while it waits, and
// write with sendmmsg. A socket in the poller is registered for
// writability too, so every datagram sent and freed woke the poller's
// thread (on loopback, at once); that, and readers parking and
// unparking through the poller, were about a sixth of the CPU of an
// answer at full load (perf record, demo cluster).
type UDPSocket struct {
	family  int
	local   *net.UDPAddr
	closed  atomic.Bool
	readers sync.WaitGroup
	mu      sync.RWMutex // held to use fd outside a reader, and to release it
	fd      int          // -1 once released
}

// listenUDP binds addr as net.ListenPacket("udp", addr) does: a wildcard
// or empty host gets a dual-stack IPv6 socket, which serves IPv4 clients
// too (an IPv4 one where the system has no IPv6); any other address, a
// socket of its family.
func listenUDP(addr string, shared bool) (*UDPSocket, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	ip := ua.AddrPort().Addr().Unmap()
	var s *UDPSocket
	if !ip.IsValid() || ip.IsUnspecified() {
		if s, err = bindUDP(netip.IPv6Unspecified(), ua.Port, "", shared); err != nil {
			s, err = bindUDP(netip.IPv4Unspecified(), ua.Port, "", shared)
		}
	} else {
		s, err = bindUDP(ip, ua.Port, ua.Zone, shared)
	}
	if err != nil {
		return nil, &net.OpError{Op: "listen", Net: "udp", Addr: ua, Err: err}
	}
	return s, nil
}

func bindUDP(ip netip.Addr, port int, zone string, shared bool) (*UDPSocket, error) {
	var sa unix.Sockaddr
	family := unix.AF_INET
	if ip.Is4() {
		sa = &unix.SockaddrInet4{Port: port, Addr: ip.As4()}
	} else {
		family = unix.AF_INET6
		s6 := &unix.SockaddrInet6{Port: port, Addr: ip.As16()}
		if zone != "" {
			if ifi, err := net.InterfaceByName(zone); err == nil {
				s6.ZoneId = uint32(ifi.Index)
			}
		}
		sa = s6
	}
	fd, err := unix.Socket(family, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err != nil {
		return nil, err
	}
	// Best effort: the system caps it at net.core.rmem_max.
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, udpReceiveBuffer)
	if family == unix.AF_INET6 && ip.IsUnspecified() {
		// A wildcard serves IPv4 clients too, as Go's own sockets do.
		if err := unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	if shared {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if shared {
		// After bind: a program attached before joins no group.
		if err := steer(fd, steerOldest); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	bound, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	s := &UDPSocket{fd: fd, family: family}
	switch b := bound.(type) {
	case *unix.SockaddrInet4:
		s.local = &net.UDPAddr{IP: net.IP(b.Addr[:]).To16(), Port: b.Port}
	case *unix.SockaddrInet6:
		s.local = &net.UDPAddr{IP: net.IP(b.Addr[:]), Port: b.Port, Zone: zone}
	}
	return s, nil
}

// LocalAddr is the bound address.
func (s *UDPSocket) LocalAddr() net.Addr { return s.local }

// Close wakes the readers blocked in recvmmsg (shutting the socket down
// for reading does that on Linux; closing it would not), waits for them
// to leave, and only then closes the descriptor, so that nothing writes
// to a number the system has meanwhile given to another file.
func (s *UDPSocket) Close() error {
	s.mu.Lock()
	if s.closed.Swap(true) {
		s.mu.Unlock()
		return nil
	}
	unix.Shutdown(s.fd, unix.SHUT_RD)
	s.mu.Unlock()
	s.readers.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	err := unix.Close(s.fd)
	s.fd = -1
	return err
}

// udpBatcher holds one reader's messages: requests in fixed slots, their
// senders' addresses, which the answers reuse, and the answers.
type udpBatcher struct {
	s     *UDPSocket
	in    [udpBatch]mmsghdr
	inIov [udpBatch]unix.Iovec
	names [udpBatch]unix.RawSockaddrInet6 // large enough for either family
	out   [udpBatch]mmsghdr
	oIov  [udpBatch]unix.Iovec
	slots []byte
	bufs  [udpBatch][]byte // answers' buffers, reused across batches
}

// mmsghdr is struct mmsghdr: a message and the length received.
type mmsghdr struct {
	hdr unix.Msghdr
	n   uint32
}

// newUDPBatcher returns a reader's messages, or nil when the socket is
// closed; the reader calls done when it leaves.
func newUDPBatcher(s *UDPSocket, answerSize int) *udpBatcher {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil
	}
	s.readers.Add(1)
	b := &udpBatcher{s: s, slots: make([]byte, udpBatch*udpSlot)}
	for i := range b.in {
		b.inIov[i].Base = &b.slots[i*udpSlot]
		b.inIov[i].SetLen(udpSlot)
		b.in[i].hdr.Iov = &b.inIov[i]
		b.in[i].hdr.SetIovlen(1)
		b.in[i].hdr.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		b.out[i].hdr.Iov = &b.oIov[i]
		b.out[i].hdr.SetIovlen(1)
		b.bufs[i] = make([]byte, 0, answerSize)
	}
	return b
}

// done tells the socket this reader has left.
func (b *udpBatcher) done() { b.s.readers.Done() }

// read waits for at least one datagram and returns how many it read.
func (b *udpBatcher) read() (int, error) {
	for i := range b.in {
		b.in[i].hdr.Namelen = unix.SizeofSockaddrInet6
		b.in[i].hdr.Flags = 0
	}
	for {
		if b.s.closed.Load() {
			return 0, net.ErrClosed
		}
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(b.s.fd),
			uintptr(unsafe.Pointer(&b.in[0])), udpBatch, unix.MSG_WAITFORONE, 0, 0)
		switch {
		case errno == unix.EINTR:
			continue
		case errno != 0:
			return 0, errno
		}
		if b.s.closed.Load() {
			return 0, net.ErrClosed
		}
		return int(n), nil
	}
}

// request is the i-th datagram read, whether it was cut to fit its slot,
// and its sender.
func (b *udpBatcher) request(i int) (req []byte, truncated bool, from netip.AddrPort) {
	m := &b.in[i]
	return b.slots[i*udpSlot : i*udpSlot+int(min(m.n, udpSlot))], m.hdr.Flags&unix.MSG_TRUNC != 0,
		sockaddrPort(&b.names[i], m.hdr.Namelen)
}

// answer queues resp as the k-th answer of the batch, to the sender of
// the i-th request.
func (b *udpBatcher) answer(k, i int, resp []byte) {
	b.bufs[k] = resp[:0]
	b.oIov[k].Base = unsafe.SliceData(resp)
	b.oIov[k].SetLen(len(resp))
	b.out[k].hdr.Name = b.in[i].hdr.Name
	b.out[k].hdr.Namelen = b.in[i].hdr.Namelen
}

// write sends the first n answers. One that fails (a client's address
// unreachable) is skipped, and the rest still go; the last error is
// returned.
func (b *udpBatcher) write(n int) error {
	var err error
	for sent := 0; sent < n; {
		k, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(b.s.fd),
			uintptr(unsafe.Pointer(&b.out[sent])), uintptr(n-sent), 0, 0, 0)
		switch {
		case errno == unix.EINTR:
		case errno != 0:
			err = errno
			sent++ // the answer at sent failed
		default:
			sent += int(k)
		}
	}
	return err
}

// WriteLate sends a forwarded answer to its client from the socket.
func (s *UDPSocket) WriteLate(resp []byte, to netip.AddrPort) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.fd < 0 {
		return
	}
	var sa unix.Sockaddr
	if s.family == unix.AF_INET6 {
		sa = &unix.SockaddrInet6{Port: int(to.Port()), Addr: to.Addr().As16()}
	} else {
		sa = &unix.SockaddrInet4{Port: int(to.Port()), Addr: to.Addr().Unmap().As4()}
	}
	unix.Sendto(s.fd, resp, 0, sa)
}

// sockaddrPort reads a sender's address without allocating.
func sockaddrPort(sa *unix.RawSockaddrInet6, n uint32) netip.AddrPort {
	switch sa.Family {
	case unix.AF_INET:
		sa4 := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(sa4.Addr), portOf(sa4.Port))
	case unix.AF_INET6:
		if n >= unix.SizeofSockaddrInet6 {
			return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), portOf(sa.Port))
		}
	}
	return netip.AddrPort{}
}

// portOf turns a port in network order, as the kernel wrote it into a
// uint16 field, into a number.
func portOf(p uint16) uint16 {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], p)
	return binary.BigEndian.Uint16(b[:])
}
