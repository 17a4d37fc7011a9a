//go:build linux

package listeners

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// The sockets of a shared address are counted by asking the kernel
// (sock_diag, as ss does) for the sockets of one port. The kernel walks
// them under the lock of that port's hash slot, so the answer is one
// instant's. /proc/net/udp and tcp are not: the kernel writes them a
// few lines per read and finds its place again by counting lines, so a
// socket closed elsewhere meanwhile (a DNS client closes one per query)
// makes the next line go unread, which may be this process's socket or
// the other process's. Then a survivor took the address back from a
// process still draining it, whose queries were lost, or gave up taking
// it back.

// Sizes and offsets of struct inet_diag_req_v2 and struct inet_diag_msg
// (linux/inet_diag.h).
const (
	diagReqLen    = 56 // family, protocol, ext, pad, states, inet_diag_sockid
	diagMsgLen    = 72 // family, state, timer, retrans, inet_diag_sockid, 5 × u32
	diagSportOff  = 4  // in inet_diag_msg; 8 in the request
	diagSrcOff    = 8  // 16 bytes: an IPv4 address in the first 4
	diagInodeOff  = 68 // host order
	diagAllStates = 0xffffffff
	diagListening = 1 << 10 // TCP_LISTEN
)

// socketsAt counts the sockets of this network namespace bound at the
// local address of socket fd (listening ones only, for TCP), fd's among
// them; proto is unix.IPPROTO_UDP or unix.IPPROTO_TCP.
func socketsAt(fd int, proto uint8) (int, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return 0, err
	}
	family, src, port := diagAddr(sa)
	if family == 0 {
		return 0, fmt.Errorf("socket %d is bound to no IP address", fd)
	}
	states := uint32(diagAllStates)
	if proto == unix.IPPROTO_TCP {
		states = diagListening
	}
	n, self := 0, false
	err = sockDiag(family, proto, states, port, func(msg []byte) {
		if binary.BigEndian.Uint16(msg[diagSportOff:]) == port && bytes.Equal(msg[diagSrcOff:diagSrcOff+len(src)], src) {
			n++
			self = self || uint64(binary.NativeEndian.Uint32(msg[diagInodeOff:])) == st.Ino
		}
	})
	if err == nil && !self {
		err = fmt.Errorf("socket %d (inode %d) is not among the kernel's sockets of port %d", fd, st.Ino, port)
	}
	return n, err
}

// diagAddr is the family, address bytes and port of a bound socket's
// address; family 0 for one that is not IP.
func diagAddr(sa unix.Sockaddr) (family uint8, src []byte, port uint16) {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return unix.AF_INET, a.Addr[:], uint16(a.Port)
	case *unix.SockaddrInet6:
		return unix.AF_INET6, a.Addr[:], uint16(a.Port)
	}
	return 0, nil, 0
}

// sockDiag asks the kernel for the sockets of family and proto in states
// whose local port is port, and calls each with the inet_diag_msg of one.
func sockDiag(family, proto uint8, states uint32, port uint16, each func(msg []byte)) error {
	s, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return fmt.Errorf("sock_diag: %w", err)
	}
	defer unix.Close(s)
	req := diagRequest(family, proto, states, port)
	if err := unix.Sendto(s, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("sock_diag: %w", err)
	}
	buf := make([]byte, 32<<10)
	for {
		n, _, err := unix.Recvfrom(s, buf, 0)
		if err != nil {
			return fmt.Errorf("sock_diag: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return fmt.Errorf("sock_diag: %w", err)
		}
		for _, m := range msgs {
			switch {
			case m.Header.Type == unix.NLMSG_DONE:
				return nil
			case m.Header.Type == unix.NLMSG_ERROR && len(m.Data) >= 4:
				if code := -int32(binary.NativeEndian.Uint32(m.Data)); code != 0 {
					return fmt.Errorf("sock_diag: %w", unix.Errno(code))
				}
			case len(m.Data) >= diagMsgLen:
				each(m.Data)
			}
		}
	}
}

// diagRequest is the netlink message asking for a dump of the sockets
// of family and proto in states whose local port is port.
func diagRequest(family, proto uint8, states uint32, port uint16) []byte {
	req := make([]byte, unix.SizeofNlMsghdr+diagReqLen)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], 1) // sequence number
	body := req[unix.SizeofNlMsghdr:]
	body[0], body[1] = family, proto
	binary.NativeEndian.PutUint32(body[4:], states)
	binary.BigEndian.PutUint16(body[8:], port) // matched by the kernel: only this port's sockets come back
	return req
}
