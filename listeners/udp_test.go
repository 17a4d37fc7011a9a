package listeners

import (
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/miekg/dns"

	"github.com/shardns/shardns/query"
)

// Many clients with many queries in flight each get every answer, sent
// to them and not to another client, as batches read and write several
// clients' datagrams in one call. Like a resolver, a client sends again
// what is unanswered after a while: a busy machine may drop datagrams
// beyond the socket's buffer.
func TestUDPBatchesAnswerEveryClient(t *testing.T) {
	addr := startListener(t, 16, time.Second)
	const clients, perClient = 8, 3 * udpBatch
	conns := make([]net.Conn, clients)
	for c := range conns {
		conn, err := net.Dial("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conns[c] = conn
	}
	seen := make([]map[uint16]bool, clients)
	send := func() {
		for q := range perClient {
			for c, conn := range conns {
				id := uint16(c<<8 | q)
				if seen[c][id] {
					continue
				}
				m := new(dns.Msg)
				m.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
				m.Id = id
				req, _ := m.Pack()
				if _, err := conn.Write(req); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for c := range seen {
		seen[c] = map[uint16]bool{}
	}
	buf := make([]byte, 512)
	deadline := time.Now().Add(10 * time.Second)
	for c := 0; c < clients; {
		if len(seen[c]) == perClient {
			c++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("client %d: %d answers of %d", c, len(seen[c]), perClient)
		}
		send()
		conns[c].SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		for len(seen[c]) < perClient {
			n, err := conns[c].Read(buf)
			if err != nil {
				break // unanswered: send again
			}
			r := new(dns.Msg)
			if err := r.Unpack(buf[:n]); err != nil {
				t.Fatal(err)
			}
			if int(r.Id>>8) != c {
				t.Fatalf("client %d got answer id %#04x", c, r.Id)
			}
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
				t.Fatalf("client %d: %v", c, r)
			}
			seen[c][r.Id] = true
		}
	}
}

// A query longer than a read slot is answered FORMERR under its own ID,
// not read in part, and the next query is answered as usual.
func TestUDPOversizedQueryIsFormatError(t *testing.T) {
	addr := startListener(t, 16, time.Second)
	conn, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	m := new(dns.Msg)
	m.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
	m.Id = 0xbeef
	m.SetEdns0(4096, false)
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_PADDING{Padding: make([]byte, udpSlot)})
	req, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(req); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 512)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	r := new(dns.Msg)
	if err := r.Unpack(buf[:n]); err != nil {
		t.Fatal(err)
	}
	if r.Id != 0xbeef || !r.Response || r.Rcode != dns.RcodeFormatError || len(r.Answer) != 0 {
		t.Fatalf("got %v", r)
	}
	expectWeb(t, addr, "udp")
}

// A listener on a wildcard address answers IPv4 clients, and IPv6 ones
// where the system has IPv6, as Go's own sockets on a wildcard do: the
// socket is IPv6 and the IPv4 clients' addresses are mapped.
func TestUDPWildcardAnswersBothFamilies(t *testing.T) {
	for _, wildcard := range []string{"[::]:0", "0.0.0.0:0", ":0"} {
		t.Run(wildcard, func(t *testing.T) {
			s, err := Bind(wildcard)
			if err != nil {
				t.Fatal(err)
			}
			_, port, _ := net.SplitHostPort(spawnListener(t, Config{}, s, NewProps))
			expectWeb(t, net.JoinHostPort("127.0.0.1", port), "udp")
			if c, err := net.ListenPacket("udp6", "[::1]:0"); err == nil {
				c.Close()
				expectWeb(t, net.JoinHostPort("::1", port), "udp")
			}
		})
	}
}

// Stopping a listener whose readers wait for a datagram returns: the
// readers wake and leave, and the port is free again at once.
func TestUDPStopWakesWaitingReaders(t *testing.T) {
	s, err := Bind("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	system := actor.NewActorSystem()
	defer system.Shutdown()
	var handler atomic.Pointer[query.Handler]
	handler.Store(testHandler())
	cfg := Config{Handler: &handler, UDPReaders: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	pid := system.Root.Spawn(NewProps(cfg, s))
	addr := s.Addr()
	expectWeb(t, addr, "udp") // the readers are running, and now wait
	stopped := make(chan struct{})
	go func() {
		system.Root.StopFuture(pid).Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener did not stop: its readers still wait")
	}
	again, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatalf("the port is still held: %v", err)
	}
	again.Close()
}
