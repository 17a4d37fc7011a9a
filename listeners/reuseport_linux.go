//go:build linux

package listeners

import (
	"context"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Shared sockets. Bound with SO_REUSEPORT, an address is one group of
// sockets in the kernel, which a newer process of the same user joins
// while the older one still serves (a DaemonSet rolled with maxSurge).
// Left alone the kernel spreads packets and connections over the group
// by a hash, so a process that has not the ring yet would answer and a
// process that closes would lose what is queued in its sockets. So the
// group carries a classic BPF program that returns the index of the one
// socket to take everything: the oldest while a newer one starts, the
// next one once the older is told to hand over. An index the group has
// not (one socket left) falls back to the hash, which is that socket.
const (
	steerOldest = 0 // the socket bound first: it serves until it hands over
	steerNext   = 1 // the socket bound after it
)

// steer attaches to the reuseport group of fd the program that sends
// every new datagram or connection to the socket at index. The program
// belongs to the group, so the last attached wins; it must be attached
// after bind (one attached before is dropped when the socket joins).
func steer(fd int, index uint32) error {
	prog := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: index}}
	return unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF,
		&unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]})
}

// reusePort is a net.ListenConfig Control that sets SO_REUSEPORT.
func reusePort(_, _ string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
	}); err != nil {
		return err
	}
	return serr
}

// steerConn runs steer on the descriptor of c.
func steerConn(c syscall.Conn, index uint32) error {
	raw, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = steer(int(fd), index) }); err != nil {
		return err
	}
	return serr
}

// listenTCP listens on addr; shared, it joins the address's group and
// keeps the group's connections on its oldest socket.
func listenTCP(addr string, shared bool, index uint32) (net.Listener, error) {
	lc := streamListenConfig()
	if !shared {
		return lc.Listen(context.Background(), "tcp", addr)
	}
	lc.Control = reusePort
	// An MPTCP listener (Go's default where the kernel has it) refuses
	// reuseport programs.
	lc.SetMultipathTCP(false)
	l, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, err
	}
	if err := steerConn(l.(*net.TCPListener), index); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// ListenShared listens on addr beside the listeners other processes of
// the same user have there, and sends every new connection of the
// address to the one bound second: while a newer process starts beside
// an older one, the newer answers (its readiness probes among them), and
// alone, a process answers everything. For the HTTP endpoints of a
// node-local process.
func ListenShared(addr string) (net.Listener, error) { return listenTCP(addr, true, steerNext) }

// Yield sends the new datagrams and connections of a shared address
// to the socket bound after this one, the newer process's: from then on
// this process only answers what it holds (Drain). Alone on the address,
// it keeps answering everything. Sockets bound by Bind ignore it.
func (s *Sockets) Yield() error {
	if !s.shared {
		return nil
	}
	s.UDP.mu.RLock()
	defer s.UDP.mu.RUnlock()
	if s.UDP.fd < 0 {
		return net.ErrClosed
	}
	if err := steer(s.UDP.fd, steerNext); err != nil {
		return err
	}
	return steerConn(s.TCP.(*net.TCPListener), steerNext)
}

// drainPoll is how often Drain looks at the queues; two looks in a row
// find them empty before it returns, which covers packets the kernel was
// delivering here as the program changed.
const drainPoll = 5 * time.Millisecond

// Drain waits until no datagram waits in the UDP socket and no
// connection in the TCP accept queue (the listener's readers take them
// meanwhile), or until ctx ends, which it returns.
func (s *Sockets) Drain(ctx context.Context) error {
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	for empty := 0; empty < 2; {
		if s.queued() {
			empty = 0
		} else {
			empty++
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// queued reports whether a datagram or a connection waits to be taken.
func (s *Sockets) queued() bool {
	if s.UDP != nil && s.UDP.queued() {
		return true
	}
	l, ok := s.TCP.(*net.TCPListener)
	if !ok {
		return false
	}
	raw, err := l.SyscallConn()
	if err != nil {
		return false
	}
	var waiting bool
	raw.Control(func(fd uintptr) {
		// On a listening socket Linux reports its accept queue's
		// length as tcpi_unacked.
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			waiting = info.Unacked > 0
		}
	})
	return waiting
}

// queued reports whether a datagram waits in the socket.
func (s *UDPSocket) queued() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.fd < 0 {
		return false
	}
	n, err := unix.IoctlGetInt(s.fd, unix.SIOCINQ)
	return err == nil && n > 0
}

// A process that replaced another beside itself is left with that
// process's program once it has gone: "the socket bound after me", whose
// index is out of range while one socket is left (the kernel falls back
// to the hash, which is that socket) but names the next process to bind,
// from its bind until it attaches its own program. That process, not
// ready, answered what came in between SERVFAIL. So the survivor attaches
// "the oldest" again once it is alone on the address (TakeBack).

// takeBackPoll is how often TakeBack counts the sockets of the address.
const takeBackPoll = 100 * time.Millisecond

// TakeBack waits until the sockets of this shared address are the only
// ones bound there (the process they replaced has closed its own), then
// attaches the program that keeps every new datagram and connection on
// the oldest socket, theirs, as BindShared does for a first process. It
// returns true once it did; false at once when the address was never
// shared with another process's sockets, or when ctx ends first.
func (s *Sockets) TakeBack(ctx context.Context) (bool, error) {
	if !s.shared || s.UDP == nil {
		return false, nil
	}
	tcp := s.TCP.(*net.TCPListener)
	t := time.NewTicker(takeBackPoll)
	defer t.Stop()
	for first := true; ; first = false {
		alone, err := s.alone()
		if err != nil {
			return false, err
		}
		if alone {
			if first {
				return false, nil // bound first: its own program is in place
			}
			s.UDP.mu.RLock()
			defer s.UDP.mu.RUnlock()
			if s.UDP.fd < 0 {
				return false, net.ErrClosed
			}
			if err := steer(s.UDP.fd, steerOldest); err != nil {
				return false, err
			}
			return true, steerConn(tcp, steerOldest)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-t.C:
		}
	}
}

// alone reports whether no other socket is bound at the UDP socket's
// address, nor listens at the TCP listener's.
func (s *Sockets) alone() (bool, error) {
	s.UDP.mu.RLock()
	fd := s.UDP.fd
	var n int
	var err error
	if fd >= 0 {
		n, err = socketsAt(fd, unix.IPPROTO_UDP)
	}
	s.UDP.mu.RUnlock()
	if fd < 0 {
		return false, net.ErrClosed
	}
	if err != nil || n > 1 {
		return false, err
	}
	raw, err := s.TCP.(*net.TCPListener).SyscallConn()
	if err != nil {
		return false, err
	}
	var cerr error
	if err := raw.Control(func(fd uintptr) { n, cerr = socketsAt(int(fd), unix.IPPROTO_TCP) }); err != nil {
		return false, err
	}
	return n <= 1, cerr
}
