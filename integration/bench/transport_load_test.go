package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
)

// A load generator in the test process for what dnsperf cannot drive: a
// new TCP connection per query (dnsperf's num-queries-per-conn=1 waits
// between reconnections and reaches about 60 q/s), DNS over HTTPS
// (dnsperf 2.10 loses answers once several streams are in flight on a
// connection to Go's HTTP/2 server, whose trace shows them all written:
// with 10 in flight it times out on most, CoreDNS's as much as
// shardns's; with Unbound it does not), and the latency percentiles at
// a fixed rate, which dnsperf does not report. Every worker asks one question at a time and
// waits for its answer.

// loadKind is how the generator reaches a server.
type loadKind int

const (
	tcpReuse    loadKind = iota // one TCP connection per worker, kept
	tcpPerQuery                 // a new TCP connection for every question
	dotReuse                    // one DNS over TLS connection per worker, kept
	dohHTTP2                    // POST over HTTP/2, every worker on one client
)

func (k loadKind) String() string {
	return [...]string{"tcp", "tcp, a connection per query", "dot", "doh (HTTP/2 POST)"}[k]
}

// queryTimeout is how long a question waits for its answer before it
// counts as failed.
const queryTimeout = 2 * time.Second

// goLoad asks a server the questions of a mix over one transport.
type goLoad struct {
	kind    loadKind
	addr    string   // host:port of the transport's listener
	queries [][]byte // packed questions, asked in turn
	tls     *tls.Config
	doh     *http.Client // shared by the workers of a DoH load
	next    atomic.Uint64
}

// newGoLoad packs the "name TYPE" lines of the mix for kind on addr.
func newGoLoad(t *testing.T, kind loadKind, addr string, mix []string) *goLoad {
	t.Helper()
	l := &goLoad{kind: kind, addr: addr, tls: &tls.Config{InsecureSkipVerify: true, ServerName: "localhost"}}
	for _, q := range mix {
		var name, typ string
		if _, err := fmt.Sscan(q, &name, &typ); err != nil {
			t.Fatalf("query line %q: %v", q, err)
		}
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(name), dns.StringToType[typ])
		b, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		l.queries = append(l.queries, b)
	}
	if kind == dohHTTP2 {
		l.tls.NextProtos = []string{"h2"}
		l.doh = &http.Client{Timeout: queryTimeout, Transport: &http.Transport{
			TLSClientConfig: l.tls, ForceAttemptHTTP2: true, MaxIdleConnsPerHost: 64,
		}}
		t.Cleanup(l.doh.CloseIdleConnections)
	}
	return l
}

// loadResult is what one run of the generator measured.
type loadResult struct {
	completed, failed, reconnects int64
	elapsed                       time.Duration
	latencies                     []time.Duration // of the fixed-rate runs, from each question's scheduled time
	clientCPU                     float64         // the test process's CPU seconds during the run
	example                       error           // a failure, nil without one
}

// p returns the q-th quantile (0.99: p99) of the latencies.
func (r loadResult) p(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	s := slices.Clone(r.latencies)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// run asks with workers at once for d: as fast as answers come when
// rate is 0, else rate questions a second spread over the workers, each
// question's latency counted from when it was due, so that a worker held
// up by a slow answer does not hide the delay it causes.
func (l *goLoad) run(t *testing.T, workers int, rate int, d time.Duration) loadResult {
	t.Helper()
	var res loadResult
	var mu sync.Mutex
	var wg sync.WaitGroup
	cpu0 := harness.CPUSeconds(t, os.Getpid())
	start := time.Now()
	deadline := start.Add(d)
	for w := range workers {
		wg.Go(func() {
			a := l.newAsker(w)
			defer a.close()
			var lat []time.Duration
			var completed, failed int64
			var example error
			for k := 0; ; k++ {
				due := time.Now()
				if rate > 0 {
					due = start.Add(time.Duration(float64(k*workers+w) / float64(rate) * float64(time.Second)))
					time.Sleep(time.Until(due))
				}
				if due.After(deadline) {
					break
				}
				if err := a.ask(l.queries[l.next.Add(1)%uint64(len(l.queries))]); err != nil {
					failed++
					example = err
					continue
				}
				completed++
				if rate > 0 {
					lat = append(lat, time.Since(due))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.completed += completed
			res.failed += failed
			res.reconnects += a.reconnects()
			res.latencies = append(res.latencies, lat...)
			if example != nil {
				res.example = example
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.clientCPU = harness.CPUSeconds(t, os.Getpid()) - cpu0
	return res
}

// asker is one worker's way of asking.
type asker interface {
	ask(query []byte) error
	reconnects() int64
	close()
}

func (l *goLoad) newAsker(worker int) asker {
	switch l.kind {
	case tcpPerQuery:
		return &perQueryAsker{l: l, worker: worker}
	case dohHTTP2:
		return &dohAsker{l: l}
	}
	return &streamAsker{l: l, worker: worker}
}

// dialer dials from a loopback address of the worker's own, so that new
// connections at thousands a second do not run out of source ports
// (each closed one waits in TIME_WAIT).
func dialer(worker int, n uint64) *net.Dialer {
	ip := net.IPv4(127, 0, byte(1+worker%200), byte(2+n%250))
	return &net.Dialer{Timeout: queryTimeout, LocalAddr: &net.TCPAddr{IP: ip}}
}

// streamAsker keeps a TCP or TLS connection and asks on it, one question
// at a time; a connection the server closed (tcpMaxQueries, idle) is
// dialled again and the question asked once more.
type streamAsker struct {
	l       *goLoad
	worker  int
	conn    net.Conn
	r       *bufio.Reader
	redials int64
	buf     []byte
}

func (a *streamAsker) dial() error {
	var err error
	d := dialer(a.worker, uint64(a.redials))
	if a.l.kind == dotReuse {
		a.conn, err = tls.DialWithDialer(d, "tcp", a.l.addr, a.l.tls)
	} else {
		a.conn, err = d.Dial("tcp", a.l.addr)
	}
	if err == nil {
		a.r = bufio.NewReader(a.conn)
	}
	return err
}

func (a *streamAsker) ask(query []byte) error {
	for attempt := 0; ; attempt++ {
		if a.conn == nil {
			if err := a.dial(); err != nil {
				return err
			}
		}
		err := a.exchange(query)
		if err == nil {
			return nil
		}
		a.conn.Close()
		a.conn = nil
		if attempt == 1 || errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		a.redials++
	}
}

func (a *streamAsker) exchange(query []byte) error {
	a.conn.SetDeadline(time.Now().Add(queryTimeout))
	return exchangeStream(a.conn, a.r, query, &a.buf)
}

// exchangeStream writes query with its length and reads one answer,
// checking that it answers the query's ID.
func exchangeStream(w io.Writer, r *bufio.Reader, query []byte, buf *[]byte) error {
	out := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(query)), uint16(len(query)))
	if _, err := w.Write(append(out, query...)); err != nil {
		return err
	}
	var n [2]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return err
	}
	size := int(binary.BigEndian.Uint16(n[:]))
	if cap(*buf) < size {
		*buf = make([]byte, size)
	}
	resp := (*buf)[:size]
	if _, err := io.ReadFull(r, resp); err != nil {
		return err
	}
	return checkAnswer(query, resp)
}

// checkAnswer reports an answer too short for a header or to another ID.
func checkAnswer(query, resp []byte) error {
	if len(resp) < 12 || !bytes.Equal(resp[:2], query[:2]) {
		return fmt.Errorf("an answer of %d bytes to another question", len(resp))
	}
	return nil
}

func (a *streamAsker) reconnects() int64 { return a.redials }

func (a *streamAsker) close() {
	if a.conn != nil {
		a.conn.Close()
	}
}

// perQueryAsker dials, asks and closes for every question, as a client
// without connection reuse does; the client closes first.
type perQueryAsker struct {
	l      *goLoad
	worker int
	n      uint64
	buf    []byte
}

func (a *perQueryAsker) ask(query []byte) error {
	a.n++
	c, err := dialer(a.worker, a.n).Dial("tcp", a.l.addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(queryTimeout))
	return exchangeStream(c, bufio.NewReaderSize(c, 512), query, &a.buf)
}

func (a *perQueryAsker) reconnects() int64 { return 0 }
func (a *perQueryAsker) close()            {}

// dohAsker POSTs each question (RFC 8484) through the load's one client,
// which multiplexes the workers' requests as HTTP/2 streams.
type dohAsker struct{ l *goLoad }

func (a *dohAsker) ask(query []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), queryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+a.l.addr+"/dns-query", bytes.NewReader(query))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/dns-message")
	req.Header.Set("Accept", "application/dns-message")
	resp, err := a.l.doh.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || resp.ProtoMajor != 2 {
		return fmt.Errorf("%s %s", resp.Proto, resp.Status)
	}
	return checkAnswer(query, body)
}

func (a *dohAsker) reconnects() int64 { return 0 }
func (a *dohAsker) close()            {}
