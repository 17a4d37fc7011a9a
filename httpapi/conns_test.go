package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/shardns/shardns/internal/testutil"
)

// served is a Server on a real loopback socket, and what it counts.
type served struct {
	s        *Server
	addr     string
	counters *Counters
}

// counter is the value of one of the server's counters.
func (sv served) counter(vec *prometheus.CounterVec, reason string) float64 {
	var m dto.Metric
	vec.WithLabelValues("http://"+sv.addr, reason).Write(&m)
	return m.GetCounter().GetValue()
}

// serve starts New(cfg) on 127.0.0.1:0, with counters of its own, and
// stops it at the end of the test.
func serve(t *testing.T, cfg Config) served {
	t.Helper()
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Ready == nil {
		cfg.Ready = func() bool { return true }
	}
	if cfg.Ring == nil {
		cfg.Ring = func() Ring { return Ring{Self: "a"} }
	}
	cfg.Counters = NewCounters(prometheus.NewRegistry())
	return serveServer(t, New(cfg), cfg.Counters)
}

func serveServer(t *testing.T, s *Server, counters *Counters) served {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return served{s: s, addr: l.Addr().String(), counters: counters}
}

// unfinished opens a connection from src (127.0.0.1 if empty) and sends
// the start of a request it never finishes.
func unfinished(t *testing.T, addr, src string) net.Conn {
	t.Helper()
	d := net.Dialer{}
	if src != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(src)}
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: shardns\r\n"); err != nil {
		t.Fatal(err)
	}
	return c
}

// closedByServer waits (at most 10 s) for the server to close c, and
// fails t if it answered anything or did not close it.
func closedByServer(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	// A socket closed with the client's unread bytes in it is reset
	// (RFC 1122 4.2.2.13): closed by the server as much as a FIN.
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the server did not close the connection: %v", err)
	}
	if len(got) > 0 {
		t.Fatalf("the server answered an unfinished request: %q", got)
	}
}

// get asks path from 127.0.0.1 on a connection of its own.
func get(addr, path string) (int, string, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// A request whose headers do not arrive within ReadHeaderTimeout is
// closed unanswered and counted.
func TestUnfinishedHeadersAreClosed(t *testing.T) {
	sv := serve(t, Config{Limits: Limits{ReadHeaderTimeout: 200 * time.Millisecond}})
	closedByServer(t, unfinished(t, sv.addr, ""))
	if got := sv.counter(sv.counters.Timeouts, "read"); got != 1 {
		t.Errorf(`shardns_http_timeouts_total{reason="read"} = %v, want 1`, got)
	}
}

// A keep-alive connection that asks nothing more is closed after
// IdleTimeout, and that is no timeout of a request.
func TestIdleKeepAliveClosesUncounted(t *testing.T) {
	sv := serve(t, Config{Limits: Limits{IdleTimeout: 200 * time.Millisecond}})
	c, err := net.Dial("tcp", sv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /health HTTP/1.1\r\nHost: shardns\r\n\r\n")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("the idle connection was not closed: %v", err)
	}
	if !strings.HasPrefix(string(got), "HTTP/1.1 200") || !strings.HasSuffix(string(got), "OK") {
		t.Fatalf("answer %q, want 200 OK", got)
	}
	if got := sv.counter(sv.counters.Timeouts, "read"); got != 0 {
		t.Errorf(`shardns_http_timeouts_total{reason="read"} = %v after an idle keep-alive, want 0`, got)
	}
}

// A client that does not take its answer is closed after WriteTimeout
// and counted.
func TestUntakenAnswerIsClosed(t *testing.T) {
	// A page larger than the socket buffers of both ends.
	large := Ring{Self: strings.Repeat("a", 8<<20)}
	sv := serve(t, Config{Ring: func() Ring { return large }, Limits: Limits{WriteTimeout: 300 * time.Millisecond}})
	c, err := net.Dial("tcp", sv.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /debug/ring HTTP/1.1\r\nHost: shardns\r\n\r\n")
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := sv.counter(sv.counters.Timeouts, "write"); got != 1 {
			return fmt.Errorf(`shardns_http_timeouts_total{reason="write"} = %v, want 1`, got)
		}
		return nil
	})
}

// A full server takes a new connection and closes the one that has
// waited longest for its request; the probe is answered.
func TestFullServerClosesLongestWaiting(t *testing.T) {
	sv := serve(t, Config{Limits: Limits{MaxConnections: 4, MaxConnectionsPerSource: 100}})
	var held []net.Conn
	for range 4 {
		held = append(held, unfinished(t, sv.addr, ""))
	}
	if code, body, err := get(sv.addr, "/health"); err != nil || code != http.StatusOK {
		t.Fatalf("/health on a full server: %d %q %v", code, body, err)
	}
	closedByServer(t, held[0])
	testutil.Eventually(t, 5*time.Second, func() error {
		if got := sv.counter(sv.counters.Evicted, "full"); got < 1 {
			return fmt.Errorf(`shardns_http_evicted_total{reason="full"} = %v, want at least 1`, got)
		}
		return nil
	})
	if n := sv.s.conns.len(); n > 4 {
		t.Errorf("%d connections open, bound 4", n)
	}
}

// A client at its own bound closes its own longest-waiting connection;
// another client is not touched.
func TestSourceBoundClosesItsOwn(t *testing.T) {
	sv := serve(t, Config{Limits: Limits{MaxConnections: 100, MaxConnectionsPerSource: 2}})
	other := unfinished(t, sv.addr, "127.0.0.1")
	first := unfinished(t, sv.addr, "127.0.0.2")
	unfinished(t, sv.addr, "127.0.0.2")
	unfinished(t, sv.addr, "127.0.0.2")
	closedByServer(t, first)
	testutil.Eventually(t, 5*time.Second, func() error {
		if got := sv.counter(sv.counters.Evicted, "source"); got != 1 {
			return fmt.Errorf(`shardns_http_evicted_total{reason="source"} = %v, want 1`, got)
		}
		return nil
	})
	// The other client's request is still open: it can finish it.
	io.WriteString(other, "\r\n")
	other.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 12)
	if _, err := io.ReadFull(other, buf); err != nil || string(buf) != "HTTP/1.1 200" {
		t.Errorf("the other client's request: %q %v, want HTTP/1.1 200", buf, err)
	}
}
