package listeners

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/query"
)

// dohUnderTest is a DNS over HTTPS listener started in place, so that a
// test can see its gates, with its counters and a client trusting it.
type dohUnderTest struct {
	*httpsListener
	url     string
	pool    *x509.CertPool
	refused map[string]prometheus.Counter
}

func startDoH(t *testing.T, limits HTTPSLimits, maxLarge int) *dohUnderTest {
	t.Helper()
	tlsConfig, pool := serverCertificate(t)
	s, err := BindTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &dohUnderTest{pool: pool, refused: map[string]prometheus.Counter{}}
	for _, r := range []string{"streams", "inflight", "evicted", "body_timeout"} {
		d.refused[r] = prometheus.NewCounter(prometheus.CounterOpts{Name: r})
	}
	limits.Refused = HTTPSRefusals{Streams: d.refused["streams"], InFlight: d.refused["inflight"],
		Evicted: d.refused["evicted"], BodyTimeout: d.refused["body_timeout"]}
	var handler atomic.Pointer[query.Handler]
	handler.Store(testHandler())
	cfg := Config{Handler: &handler, TLS: tlsConfig, MaxConnections: 64, IdleTimeout: 5 * time.Second,
		MaxLargeMessages: maxLarge, HTTPS: limits, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	d.httpsListener = &httpsListener{cfg: cfg, sockets: s}
	d.start()
	t.Cleanup(d.stop)
	d.url = "https://" + s.Addr() + "/dns-query"
	return d
}

// client speaks HTTP/2, or HTTP/1.1 alone with http1.
func (d *dohUnderTest) client(http1 bool) *http.Client {
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: d.pool, ServerName: "localhost"}, ForceAttemptHTTP2: true}
	if http1 {
		tr.ForceAttemptHTTP2, tr.TLSNextProto = false, map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: tr}
}

func (d *dohUnderTest) counted(t *testing.T, reason string) float64 {
	return counterValue(t, d.refused[reason])
}

// trickle POSTs a body declaring 65,535 bytes, sends sent of them and
// holds the rest; the status it is answered comes on the channel.
func (d *dohUnderTest) trickle(t *testing.T, client *http.Client, sent int) <-chan int {
	t.Helper()
	body, w := io.Pipe()
	t.Cleanup(func() { w.CloseWithError(io.ErrUnexpectedEOF) })
	req, _ := http.NewRequest("POST", d.url, body)
	req.Header.Set("Content-Type", dohMediaType)
	req.ContentLength = dns.MaxMsgSize
	status := make(chan int, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			status <- 0
			return
		}
		resp.Body.Close()
		status <- resp.StatusCode
	}()
	go w.Write(make([]byte, sent))
	return status
}

func (d *dohUnderTest) holding(g *gate, n int) func() error {
	return func() error {
		if got := g.inUse(); got != n {
			return fmt.Errorf("%d places taken, want %d", got, n)
		}
		return nil
	}
}

// expectAnswer POSTs the test question and checks the answer.
func (d *dohUnderTest) expectAnswer(t *testing.T, client *http.Client, proto string) {
	t.Helper()
	resp, err := client.Post(d.url, dohMediaType, bytes.NewReader(dohPacked(t, "web.ns.svc.cluster.local.", dns.TypeA)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := new(dns.Msg)
	if resp.StatusCode != http.StatusOK || resp.Proto != proto || m.Unpack(b) != nil || len(m.Answer) != 1 {
		t.Fatalf("%s %d: %v", resp.Proto, resp.StatusCode, m)
	}
}

func expectStatus(t *testing.T, status <-chan int, want int, what string) {
	t.Helper()
	select {
	case got := <-status:
		if got != want {
			t.Fatalf("%s: HTTP %d, want %d", what, got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: no answer", what)
	}
}

// With every place in flight taken by trickling bodies, a real query
// takes the place of the body arriving the longest (503, counted), over
// HTTP/2 and HTTP/1.1 alike.
func TestDoHInFlightBounded(t *testing.T) {
	for _, c := range []struct {
		proto string
		http1 bool
	}{{"HTTP/2.0", false}, {"HTTP/1.1", true}} {
		t.Run(c.proto, func(t *testing.T) {
			d := startDoH(t, HTTPSLimits{MaxInFlight: 2}, 0)
			client := d.client(c.http1)
			oldest := d.trickle(t, client, 100)
			testutil.Eventually(t, 5*time.Second, d.holding(d.inflight, 1))
			d.trickle(t, client, 100)
			testutil.Eventually(t, 5*time.Second, d.holding(d.inflight, 2))
			d.expectAnswer(t, client, c.proto)
			expectStatus(t, oldest, http.StatusServiceUnavailable, "the oldest trickling body")
			if got := d.counted(t, "evicted"); got != 1 {
				t.Fatalf("evicted counted %v, want 1", got)
			}
		})
	}
}

// With every place in flight being answered, a request is answered 503
// at once with Retry-After, and counted.
func TestDoHRefusedWhenAllAnswering(t *testing.T) {
	d := startDoH(t, HTTPSLimits{MaxInFlight: 1}, 0)
	answering := d.inflight.enter(func() { t.Error("a request being answered was cut") })
	d.inflight.arrived(answering)
	resp, err := d.client(false).Post(d.url, dohMediaType, bytes.NewReader(dohPacked(t, "web.ns.svc.cluster.local.", dns.TypeA)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || d.counted(t, "inflight") != 1 {
		t.Fatalf("HTTP %d, Retry-After %q, inflight counted %v", resp.StatusCode, resp.Header.Get("Retry-After"), d.counted(t, "inflight"))
	}
	d.inflight.leave(answering)
	d.expectAnswer(t, d.client(false), "HTTP/2.0")
}

// A body that outgrows the smallest buffer takes a place among the large
// messages: a second one cuts the first; and a body not in within the
// body timeout is answered 408. The timeout leaves the second request
// time to arrive on a loaded machine before the first's runs out (at
// 300 ms the first was once answered 408 under -race, not cut).
func TestDoHLargeBodiesAndTimeout(t *testing.T) {
	d := startDoH(t, HTTPSLimits{BodyTimeout: 2 * time.Second}, 1)
	client := d.client(false)
	first := d.trickle(t, client, 600)
	testutil.Eventually(t, 5*time.Second, d.holding(d.large, 1))
	second := d.trickle(t, client, 600)
	expectStatus(t, first, http.StatusServiceUnavailable, "the first large body")
	expectStatus(t, second, http.StatusRequestTimeout, "the second, trickling past the body timeout")
	if d.counted(t, "evicted") != 1 || d.counted(t, "body_timeout") != 1 {
		t.Fatalf("evicted %v, body_timeout %v, want 1 and 1", d.counted(t, "evicted"), d.counted(t, "body_timeout"))
	}
	d.expectAnswer(t, client, "HTTP/2.0")
	testutil.Eventually(t, 5*time.Second, d.holding(d.large, 0))
	testutil.Eventually(t, 5*time.Second, d.holding(d.inflight, 0))
}

// A connection opening more streams than the limit has the extra ones
// reset, counted; the streams within it are answered.
func TestDoHStreamLimit(t *testing.T) {
	d := startDoH(t, HTTPSLimits{MaxStreams: 2}, 0)
	conn, err := tls.Dial("tcp", d.sockets.Addr(), &tls.Config{RootCAs: d.pool, ServerName: "localhost", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	fr := http2.NewFramer(conn, conn)
	conn.Write([]byte(http2.ClientPreface))
	fr.WriteSettings()
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	for id := uint32(1); id <= 5; id += 2 { // three streams, their bodies to come
		block.Reset()
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":authority", "localhost"},
			{":path", "/dns-query"}, {"content-type", dohMediaType}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block.Bytes(), EndHeaders: true})
	}
	q := dohPacked(t, "web.ns.svc.cluster.local.", dns.TypeA)
	for id := uint32(1); id <= 5; id += 2 {
		fr.WriteData(id, true, q)
	}
	reset, answered := map[uint32]bool{}, map[uint32]bool{}
	for len(reset)+len(answered) < 3 {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reset %v, answered %v: %v", reset, answered, err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.RSTStreamFrame:
			reset[f.StreamID] = true
		case *http2.HeadersFrame:
			answered[f.StreamID] = true
		}
	}
	if !answered[1] || !answered[3] || !reset[5] {
		t.Fatalf("answered %v, reset %v: want 1 and 3 answered, 5 reset", answered, reset)
	}
	if got := d.counted(t, "streams"); got != 1 {
		t.Fatalf("streams counted %v, want 1", got)
	}
}
