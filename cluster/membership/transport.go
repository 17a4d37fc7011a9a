package membership

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-sockaddr"
	"github.com/hashicorp/memberlist"
)

// transport is memberlist's transport, UDP for packets and TCP for
// streams, written here for two reasons:
//   - Dials, and the connections they made, end when Close is called:
//     memberlist dials without a context, so a join of a seed that drops
//     packets, or accepts and never answers, would otherwise hold Close
//     for TCPTimeout.
//   - A packet received costs its own size. memberlist's NetTransport
//     reads every packet into a fresh 64 KiB buffer; at a probe every
//     200 ms (gossip: fast) that alone was 0.6 MB/s of garbage on an idle
//     replica, which grew its heap to the collector's target within
//     seconds, however little it kept. Here one buffer per socket reads
//     and each packet is copied out at its length: memberlist may keep
//     parts of a packet it handles.
//   - A stream costs what a push/pull costs: each accepted connection
//     passes the gate (streams.go) before memberlist reads it.
type transport struct {
	tcp     *net.TCPListener
	udp     *net.UDPConn
	packets chan *memberlist.Packet
	streams chan net.Conn
	closed  chan struct{} // closed by Shutdown: no one may read the channels any more
	closing sync.Once
	wg      sync.WaitGroup
	logger  *log.Logger

	ctx     context.Context
	blocked func(addr string) bool
	gate    *streamGate // nil: every stream is handed over as accepted
	// local is the address streams are dialed from: the bind IP when one
	// is set, so that peers see the same address in gossip packets and
	// streams (admission and rejections go by it), as they do in a pod.
	local *net.TCPAddr
}

var _ memberlist.NodeAwareTransport = (*transport)(nil)

var errBlocked = errors.New("membership: address blocked by test partition")

const (
	// maxPacket is the largest UDP payload; memberlist's own packets
	// stay under its UDPBufferSize (1400 bytes).
	maxPacket = 65536
	// socketReceiveBuffer is the kernel receive buffer asked for the UDP
	// socket, halved until the kernel accepts it (as memberlist does):
	// bursts of gossip must not be dropped while the reader is busy.
	socketReceiveBuffer = 2 << 20
)

// listen binds TCP and UDP on ip:port. With port 0 the kernel picks the
// TCP port and the UDP socket must get the same one, which can race with
// other sockets, so it retries as memberlist's own Create does.
func listen(ctx context.Context, ip string, port int, logger *log.Logger, blocked func(string) bool, gate *streamGate) (*transport, error) {
	addr := net.ParseIP(ip)
	attempts := 1
	if port == 0 {
		attempts = 10
	}
	var err error
	for range attempts {
		var tcp *net.TCPListener
		if tcp, err = net.ListenTCP("tcp", &net.TCPAddr{IP: addr, Port: port}); err != nil {
			break
		}
		bound := tcp.Addr().(*net.TCPAddr).Port
		var udp *net.UDPConn
		if udp, err = net.ListenUDP("udp", &net.UDPAddr{IP: addr, Port: bound}); err != nil {
			_ = tcp.Close()
			if port == 0 && strings.Contains(err.Error(), "address already in use") {
				continue
			}
			break
		}
		setReceiveBuffer(udp)
		t := &transport{tcp: tcp, udp: udp, logger: logger, ctx: ctx, blocked: blocked, gate: gate,
			packets: make(chan *memberlist.Packet), streams: make(chan net.Conn), closed: make(chan struct{})}
		if addr != nil && !addr.IsUnspecified() {
			t.local = &net.TCPAddr{IP: addr}
		}
		t.wg.Add(2)
		go t.acceptStreams()
		go t.readPackets()
		return t, nil
	}
	return nil, fmt.Errorf("membership: bind %s: %w", net.JoinHostPort(ip, fmt.Sprint(port)), err)
}

// setReceiveBuffer asks the kernel for socketReceiveBuffer bytes of
// receive buffer, halving the ask until it is granted.
func setReceiveBuffer(udp *net.UDPConn) {
	for size := socketReceiveBuffer; size > 0; size /= 2 {
		if udp.SetReadBuffer(size) == nil {
			return
		}
	}
}

// GetAutoBindPort is the port bound, the kernel's pick when asked for 0.
func (t *transport) GetAutoBindPort() int {
	return t.tcp.Addr().(*net.TCPAddr).Port
}

// FinalAdvertiseAddr implements memberlist.Transport: the address given,
// else the bound one, else (bound to every interface) a private address
// of this host, as memberlist's NetTransport chooses.
func (t *transport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	if ip == "" {
		bound := t.tcp.Addr().(*net.TCPAddr).IP
		if !bound.IsUnspecified() {
			return bound, t.GetAutoBindPort(), nil
		}
		private, err := sockaddr.GetPrivateIP()
		if err != nil {
			return nil, 0, fmt.Errorf("membership: interface addresses: %w", err)
		}
		if private == "" {
			return nil, 0, errors.New("membership: no private IP address to advertise; set cluster.advertise")
		}
		ip, port = private, t.GetAutoBindPort()
	}
	a := net.ParseIP(ip)
	if a == nil {
		return nil, 0, fmt.Errorf("membership: advertise address %q is not an IP address", ip)
	}
	if a4 := a.To4(); a4 != nil {
		a = a4
	}
	return a, port, nil
}

// PacketCh implements memberlist.Transport.
func (t *transport) PacketCh() <-chan *memberlist.Packet { return t.packets }

// StreamCh implements memberlist.Transport.
func (t *transport) StreamCh() <-chan net.Conn { return t.streams }

// Shutdown implements memberlist.Transport: it closes the sockets and
// waits for their readers, also when no one reads their channels (a
// Create that failed).
func (t *transport) Shutdown() error {
	t.closing.Do(func() {
		close(t.closed)
		_ = t.tcp.Close()
		_ = t.udp.Close()
	})
	t.wg.Wait()
	return nil
}

// isClosed reports whether Shutdown was called.
func (t *transport) isClosed() bool {
	select {
	case <-t.closed:
		return true
	default:
		return false
	}
}

// readPackets hands each UDP packet to memberlist in a buffer of its own
// size, read through one buffer for the socket.
func (t *transport) readPackets() {
	defer t.wg.Done()
	buf := make([]byte, maxPacket)
	for {
		n, from, err := t.udp.ReadFrom(buf)
		at := time.Now()
		switch {
		case err != nil && t.isClosed():
			return
		case err != nil:
			t.logger.Printf("[ERR] memberlist: Error reading UDP packet: %v", err)
			continue
		case n < 1:
			continue // no message in it
		}
		select {
		case t.packets <- &memberlist.Packet{Buf: bytes.Clone(buf[:n]), From: from, Timestamp: at}:
		case <-t.closed:
			return
		}
	}
}

// acceptStreams hands each TCP connection the gate admits to memberlist,
// pausing after a failed accept (a full file table) from 5 ms up to a
// second.
func (t *transport) acceptStreams() {
	defer t.wg.Done()
	var pause time.Duration
	for {
		c, err := t.tcp.Accept()
		if err != nil {
			if t.isClosed() {
				return
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			t.logger.Printf("[ERR] memberlist: Error accepting TCP connection: %v", err)
			time.Sleep(pause)
			continue
		}
		pause = 0
		if t.gate != nil {
			var ok bool
			if c, ok = t.gate.take(c); !ok {
				continue
			}
		}
		select {
		case t.streams <- c:
		case <-t.closed:
			_ = c.Close()
			return
		}
	}
}

// DialTimeout implements memberlist.Transport.
func (t *transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport.
func (t *transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.blocked != nil && t.blocked(a.Addr) {
		return nil, errBlocked
	}
	d := net.Dialer{Timeout: timeout}
	if t.local != nil {
		d.LocalAddr = t.local
	}
	c, err := d.DialContext(t.ctx, "tcp", a.Addr)
	if err != nil {
		return nil, err
	}
	// A peer that accepts but never answers holds a push/pull for
	// TCPTimeout; closing the connection on Close ends it at once.
	stop := context.AfterFunc(t.ctx, func() { _ = c.Close() })
	return &conn{Conn: c, stop: stop}, nil
}

// conn is a dialed connection that Close of the Membership also closes.
type conn struct {
	net.Conn
	stop func() bool
}

func (c *conn) Close() error {
	c.stop()
	return c.Conn.Close()
}

// WriteTo implements memberlist.Transport.
func (t *transport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

// WriteToAddress implements memberlist.NodeAwareTransport.
func (t *transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if t.blocked != nil && t.blocked(a.Addr) {
		return time.Now(), nil // lost on the way, as UDP may be
	}
	to, err := net.ResolveUDPAddr("udp", a.Addr)
	if err != nil {
		return time.Time{}, err
	}
	_, err = t.udp.WriteTo(b, to)
	return time.Now(), err
}
