package listeners

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// frame is m packed with its length prefix.
func frame(t testing.TB, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint16(nil, uint16(len(b))), b...)
}

// webQuestion is the test zone's name asked with id, padded to at
// least size bytes when size is over 512.
func webQuestion(t testing.TB, id uint16, size int) []byte {
	m := new(dns.Msg)
	m.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
	m.Id = id
	if size > 512 {
		m.SetEdns0(4096, false)
		m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_PADDING{Padding: make([]byte, size)})
	}
	return frame(t, m)
}

// readAnswers reads n answers from r and checks that they answer ids
// first to last, in order.
func readAnswers(t *testing.T, c net.Conn, r *bufio.Reader, first uint16, n int) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for i := range n {
		var size [2]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			t.Fatalf("answer %d of %d: %v", i+1, n, err)
		}
		b := make([]byte, binary.BigEndian.Uint16(size[:]))
		if _, err := io.ReadFull(r, b); err != nil {
			t.Fatalf("answer %d of %d: %v", i+1, n, err)
		}
		m := new(dns.Msg)
		if err := m.Unpack(b); err != nil {
			t.Fatalf("answer %d of %d: %v", i+1, n, err)
		}
		if m.Id != first+uint16(i) || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
			t.Fatalf("answer %d of %d: want id %d answered, got %v", i+1, n, first+uint16(i), m)
		}
	}
}

// expectClosed reads from c until the server closes it: EOF, or a reset
// when it closed with questions unread.
func expectClosed(t *testing.T, c net.Conn, r io.Reader, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := r.Read(make([]byte, 1)); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("%s: read %d bytes, %v; want the connection closed", what, n, err)
	}
}

// pipelinedStream is 150 questions, ids 1 to 150, several kilobytes:
// the 75th is over 512 bytes, so that a large message comes between
// small ones, partly read with them.
func pipelinedStream(t *testing.T) []byte {
	var b []byte
	for id := uint16(1); id <= 150; id++ {
		b = append(b, pipelinedQuestion(t, id)...)
	}
	return b
}

// pipelinedQuestion is the question of pipelinedStream with id.
func pipelinedQuestion(t *testing.T, id uint16) []byte {
	if id == 75 {
		return webQuestion(t, id, 700)
	}
	return webQuestion(t, id, 0)
}

// Questions written at once, many times the read buffer, a large one
// among them, are all answered, in order, over TCP and over TLS: sent
// in one TLS record (frames cut at the record's ends) or one record each.
func TestPipelinedQuestionsAnsweredInOrder(t *testing.T) {
	stream := pipelinedStream(t)
	t.Run("tcp", func(t *testing.T) {
		c, err := net.Dial("tcp", startListenerWith(t, Config{MaxConnections: 4, IdleTimeout: 5 * time.Second}))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(stream); err != nil {
			t.Fatal(err)
		}
		readAnswers(t, c, bufio.NewReader(c), 1, 150)
	})
	for _, records := range []string{"one record", "a record each"} {
		t.Run("tls, "+records, func(t *testing.T) {
			addr, pool := tlsListenerConfig(t, "tls", Config{MaxConnections: 4, IdleTimeout: 5 * time.Second})
			c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"dot"}})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if records == "one record" {
				_, err = c.Write(stream)
			} else {
				for id := uint16(1); id <= 150 && err == nil; id++ {
					_, err = c.Write(pipelinedQuestion(t, id))
				}
			}
			if err != nil {
				t.Fatal(err)
			}
			readAnswers(t, c, bufio.NewReader(c), 1, 150)
		})
	}
}

// A connection's quota counts pipelined questions: of three written at
// once on a connection allowed two, two are answered, then it closes.
func TestTCPQuotaOfPipelinedQuestions(t *testing.T) {
	c, err := net.Dial("tcp", startListenerWith(t, Config{MaxConnections: 4, IdleTimeout: 5 * time.Second, MaxQueries: 2}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(append(append(webQuestion(t, 1, 0), webQuestion(t, 2, 0)...), webQuestion(t, 3, 0)...)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	readAnswers(t, c, r, 1, 2)
	expectClosed(t, c, r, "after the quota")
}

// A message that is not a question closes the connection, and the
// questions written before it in the same write are answered first; so
// is a length of zero.
func TestTCPAnswersBeforeClosingOnNonsense(t *testing.T) {
	response := new(dns.Msg)
	response.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
	response.Response = true
	for name, nonsense := range map[string][]byte{"a response": frame(t, response), "an empty message": {0, 0}} {
		t.Run(name, func(t *testing.T) {
			c, err := net.Dial("tcp", startListenerWith(t, Config{MaxConnections: 4, IdleTimeout: 5 * time.Second}))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			stream := append(append(webQuestion(t, 1, 0), webQuestion(t, 2, 0)...), nonsense...)
			if _, err := c.Write(append(stream, webQuestion(t, 3, 0)...)); err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(c)
			readAnswers(t, c, r, 1, 2)
			expectClosed(t, c, r, "after "+name)
		})
	}
}

// The read timeout bounds a question's whole arrival, not each read: a
// client that trickles its first question a byte at a time, or (idle
// timeout) its second, is closed when the timeout is up although bytes
// keep coming.
func TestTCPTrickledQuestionTimesOut(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, after := range []int{0, 1} {
		t.Run(fmt.Sprintf("after %d questions", after), func(t *testing.T) {
			cfg := Config{MaxConnections: 4, ReadTimeout: timeout, IdleTimeout: 5 * time.Second}
			if after > 0 {
				cfg.ReadTimeout, cfg.IdleTimeout = 5*time.Second, timeout
			}
			c, err := net.Dial("tcp", startListenerWith(t, cfg))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			r := bufio.NewReader(c)
			for id := range after {
				if _, err := c.Write(webQuestion(t, uint16(id+1), 0)); err != nil {
					t.Fatal(err)
				}
				readAnswers(t, c, r, uint16(id+1), 1)
			}
			q := webQuestion(t, 9, 0)
			// The client's pace: a byte each 40ms, the question whole
			// after about 2s.
			stop := make(chan struct{})
			var wg sync.WaitGroup
			defer wg.Wait()
			defer close(stop)
			wg.Go(func() {
				tick := time.NewTicker(40 * time.Millisecond)
				defer tick.Stop()
				for _, b := range q {
					select {
					case <-stop:
						return
					case <-tick.C:
					}
					if _, err := c.Write([]byte{b}); err != nil {
						return
					}
				}
			})
			start := time.Now()
			expectClosed(t, c, r, "a trickled question")
			if took := time.Since(start); took > time.Duration(len(q))*40*time.Millisecond/2 {
				t.Fatalf("closed after %v, want about %v: the timeout was set anew on each read", took, timeout)
			}
		})
	}
}

// loopbackPair is both ends of one TCP connection over loopback, closed
// when the test ends.
func loopbackPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if client, err = net.Dial("tcp", ln.Addr().String()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	if server, err = ln.Accept(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}

// Answers queued by the serving loop go out in order, before any late
// answer written after them, and every message written concurrently
// arrives whole.
func TestTCPWriterOrderAndFrames(t *testing.T) {
	client, server := loopbackPair(t)
	w := &tcpWriter{conn: server, timeout: 5 * time.Second}
	r := bufio.NewReader(client)
	next := func() string {
		t.Helper()
		client.SetReadDeadline(time.Now().Add(5 * time.Second))
		var size [2]byte
		if _, err := io.ReadFull(r, size[:]); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, binary.BigEndian.Uint16(size[:]))
		if _, err := io.ReadFull(r, b); err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	w.queue([]byte("first"))
	w.queue([]byte("second"))
	w.WriteLate([]byte("late"), addrPort(client.LocalAddr()))
	w.queue([]byte("third"))
	w.flush()
	for _, want := range []string{"first", "second", "late", "third"} {
		if got := next(); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}

	// Late writers beside the loop: each message whole, the loop's in
	// order.
	const writers, each = 4, 200
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				w.WriteLate(fmt.Appendf(nil, "late %d %d", g, i), addrPort(client.LocalAddr()))
			}
		})
	}
	wg.Go(func() {
		for i := range each {
			w.queue(fmt.Appendf(nil, "queued %04d", i))
			if i%7 == 0 {
				w.flush()
			}
		}
		w.flush()
	})
	seen := map[string]bool{}
	queued := 0
	for range (writers + 1) * each {
		m := next()
		if seen[m] {
			t.Fatalf("%q twice", m)
		}
		seen[m] = true
		var g, i int
		if _, err := fmt.Sscanf(m, "queued %d", &i); err == nil {
			if i != queued {
				t.Fatalf("queued answer %d came as number %d", i, queued)
			}
			queued++
		} else if _, err := fmt.Sscanf(m, "late %d %d", &g, &i); err != nil || g >= writers || i >= each {
			t.Fatalf("a message mangled: %q", m)
		}
	}
	wg.Wait()
}

// A flush that fails is remembered: the serving loop closes the
// connection rather than write answers after a broken one.
func TestTCPWriterKeepsFailure(t *testing.T) {
	_, server := loopbackPair(t)
	w := &tcpWriter{conn: server, timeout: 5 * time.Second}
	server.Close()
	w.queue([]byte("answer"))
	if err := w.flush(); err == nil {
		t.Fatal("a flush onto a closed connection did not fail")
	}
	if err := w.queue([]byte("next")); !errors.Is(err, net.ErrClosed) && !errors.Is(err, os.ErrClosed) {
		t.Fatalf("queue after a failed flush: %v, want the failure", err)
	}
}
