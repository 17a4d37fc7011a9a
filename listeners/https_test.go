package listeners

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/forward"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/query"
)

func dohPacked(t testing.TB, name string, qtype uint16) []byte {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id = 0 // RFC 8484 section 4.1: cache friendly
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDoHQuery(t *testing.T) {
	q := dohPacked(t, "web.ns.svc.cluster.local.", dns.TypeA)
	b64 := base64.RawURLEncoding.EncodeToString(q)
	cases := []struct {
		name, method, target, contentType string
		body                              []byte
		status                            int
	}{
		{"GET", "GET", "/dns-query?dns=" + b64, "", nil, 0},
		{"GET padded", "GET", "/dns-query?dns=" + base64.URLEncoding.EncodeToString(q), "", nil, 0},
		{"POST", "POST", "/dns-query", "application/dns-message", q, 0},
		{"POST with parameters", "POST", "/dns-query", "application/dns-message; charset=binary", q, 0},
		{"GET without dns", "GET", "/dns-query?name=x", "", nil, http.StatusBadRequest},
		{"GET standard base64", "GET", "/dns-query?dns=" + strings.ReplaceAll(base64.StdEncoding.EncodeToString(q), "=", "") + "+/", "", nil, http.StatusBadRequest},
		{"GET too short", "GET", "/dns-query?dns=" + base64.RawURLEncoding.EncodeToString(q[:11]), "", nil, http.StatusBadRequest},
		{"POST json", "POST", "/dns-query", "application/dns-json", q, http.StatusUnsupportedMediaType},
		{"POST no type", "POST", "/dns-query", "", q, http.StatusUnsupportedMediaType},
		{"POST too large", "POST", "/dns-query", "application/dns-message", make([]byte, dns.MaxMsgSize+1), http.StatusRequestEntityTooLarge},
		{"POST empty", "POST", "/dns-query", "application/dns-message", nil, http.StatusBadRequest},
		{"PUT", "PUT", "/dns-query", "application/dns-message", q, http.StatusMethodNotAllowed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := httptest.NewRequest(c.method, c.target, bytes.NewReader(c.body))
			if c.contentType != "" {
				r.Header.Set("Content-Type", c.contentType)
			}
			got, status, err := dohQuery(r, nil)
			if status != c.status {
				t.Fatalf("status %d (%v), want %d", status, err, c.status)
			}
			if c.status == 0 && !bytes.Equal(got.bytes(), q) {
				t.Fatalf("query %x, want %x", got.bytes(), q)
			}
			got.release()
			w := httptest.NewRecorder()
			if c.status != 0 {
				refuse(w, r, status, err)
			}
			if c.status == http.StatusMethodNotAllowed && w.Header().Get("Allow") != "GET, POST" {
				t.Fatalf("Allow = %q", w.Header().Get("Allow"))
			}
		})
	}
}

func TestCacheAge(t *testing.T) {
	replyCompressed := func(compress bool, rcode int, rrs ...string) []byte {
		m := new(dns.Msg)
		m.Compress = compress
		m.SetQuestion("x.example.", dns.TypeA)
		m.Response, m.Rcode = true, rcode
		for _, s := range rrs {
			rr, err := dns.NewRR(s)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := rr.(*dns.SOA); ok {
				m.Ns = append(m.Ns, rr)
			} else {
				m.Answer = append(m.Answer, rr)
			}
		}
		m.SetEdns0(4096, false)
		b, _ := m.Pack()
		return b
	}
	reply := func(rcode int, rrs ...string) []byte { return replyCompressed(false, rcode, rrs...) }
	full := reply(0, "x.example. 30 IN A 10.0.0.1", "x.example. 12 IN A 10.0.0.2")
	cases := []struct {
		name string
		resp []byte
		want uint32
	}{
		{"smallest answer TTL", reply(0, "x.example. 30 IN A 10.0.0.1", "x.example. 12 IN A 10.0.0.2"), 12},
		{"negative: SOA minimum", reply(3, "example. 60 IN SOA ns. host. 1 2 3 4 5"), 5},
		{"negative: SOA TTL", reply(3, "example. 2 IN SOA ns. host. 1 2 3 4 30"), 2},
		{"no records", reply(2), 0},
		{"negative, names compressed", replyCompressed(true, 3, "x.example. 60 IN SOA ns.x.example. host.x.example. 1 2 3 4 7"), 7},
		{"not a message", []byte{1, 2, 3}, 0},
		{"cut short", full[:len(full)-20], 0},
	}
	for _, c := range cases {
		if got := cacheAge(c.resp); got != c.want {
			t.Errorf("%s: max-age %d, want %d", c.name, got, c.want)
		}
	}
}

// tlsListener serves the test zone over DNS over TLS or HTTPS
// with a new self-signed certificate, and returns the address and a pool
// trusting the certificate.
func tlsListener(t *testing.T, transport string, blocks ...Block) (string, *x509.CertPool) {
	t.Helper()
	return tlsListenerWith(t, transport, nil, blocks...)
}

// tlsListenerWith is tlsListener answering through handler (nil: the
// test zone's).
func tlsListenerWith(t *testing.T, transport string, handler *atomic.Pointer[query.Handler], blocks ...Block) (string, *x509.CertPool) {
	t.Helper()
	var scope atomic.Pointer[Scope]
	scope.Store(NewScope(append([]Block{{Zones: []string{"cluster.local"}}}, blocks...), ""))
	return tlsListenerConfig(t, transport, Config{MaxConnections: 16, MaxQueries: 100, IdleTimeout: 2 * time.Second,
		Scope: &scope, Handler: handler})
}

// tlsListenerConfig is tlsListener with the bounds and scope of cfg.
func tlsListenerConfig(t testing.TB, transport string, cfg Config) (string, *x509.CertPool) {
	t.Helper()
	var pool *x509.CertPool
	cfg.TLS, pool = serverCertificate(t)
	s, err := BindTCP("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	props := NewProps
	if transport == "https" {
		props = NewHTTPSProps
	}
	return spawnListener(t, cfg, s, props), pool
}

// serverCertificate is the TLS configuration of a server for
// "localhost" and the pool that trusts it.
func serverCertificate(t testing.TB) (*tls.Config, *x509.CertPool) {
	t.Helper()
	certFile, keyFile, cert := testutil.WriteCert(t, t.TempDir(), "server", "shardns test")
	c, err := LoadCertificate(certFile, keyFile, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return c.TLSConfig(), pool
}

// DNS over TLS: ALPN dot, the certificate given, and the zone answered
// (and others refused) as over TCP.
func TestDoT(t *testing.T) {
	addr, pool := tlsListener(t, "tls")
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"dot"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if p := conn.ConnectionState().NegotiatedProtocol; p != "dot" {
		t.Fatalf("ALPN %q, want dot", p)
	}
	dc := &dns.Conn{Conn: conn}
	for name, want := range map[string]int{"web.ns.svc.cluster.local.": dns.RcodeSuccess, "example.com.": dns.RcodeRefused} {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		if err := dc.WriteMsg(m); err != nil {
			t.Fatal(err)
		}
		r, err := dc.ReadMsg()
		if err != nil {
			t.Fatal(err)
		}
		if r.Rcode != want || (want == dns.RcodeSuccess && len(r.Answer) != 1) {
			t.Fatalf("%s: got %v", name, r)
		}
	}
}

func dohClient(pool *x509.CertPool) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}, ForceAttemptHTTP2: true}}
}

// DNS over HTTPS: GET and POST over HTTP/2, the answer as
// application/dns-message with max-age the TTL; and the HTTP errors.
func TestDoH(t *testing.T) {
	addr, pool := tlsListener(t, "https", Block{Zones: []string{"whoami.test"}, Whoami: true})
	client := dohClient(pool)
	base := "https://" + addr + "/dns-query"
	q := dohPacked(t, "web.ns.svc.cluster.local.", dns.TypeA)
	get := func(url string) *http.Response {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	post := func(contentType string, body []byte) *http.Response {
		resp, err := client.Post(base, contentType, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	answer := func(resp *http.Response) *dns.Msg {
		t.Helper()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/dns-message" || resp.Proto != "HTTP/2.0" {
			t.Fatalf("status %d, type %q, proto %s", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Proto)
		}
		b, _ := io.ReadAll(resp.Body)
		m := new(dns.Msg)
		if err := m.Unpack(b); err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, resp := range []*http.Response{get(base + "?dns=" + base64.RawURLEncoding.EncodeToString(q)), post("application/dns-message", q)} {
		if cc := resp.Header.Get("Cache-Control"); cc != "max-age=5" {
			t.Fatalf("Cache-Control %q, want max-age=5", cc)
		}
		if m := answer(resp); len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "10.0.0.1" {
			t.Fatalf("got %v", m)
		}
	}
	if m := answer(post("application/dns-message", dohPacked(t, "example.com.", dns.TypeA))); m.Rcode != dns.RcodeRefused {
		t.Fatalf("outside the zones: %v", m)
	}
	if m := answer(post("application/dns-message", dohPacked(t, "whoami.test.", dns.TypeA))); len(m.Extra) != 2 ||
		m.Extra[1].Header().Name != "_tcp.whoami.test." {
		t.Fatalf("whoami over https: %v", m)
	}
	for url, want := range map[string]int{
		base + "?dns=%%%":                    http.StatusBadRequest,
		"https://" + addr + "/resolve?dns=x": http.StatusNotFound,
	} {
		if got := get(url).StatusCode; got != want {
			t.Errorf("GET %s: %d, want %d", url, got, want)
		}
	}
	if got := post("text/plain", q).StatusCode; got != http.StatusUnsupportedMediaType {
		t.Errorf("POST text/plain: %d", got)
	}
	req, _ := http.NewRequest("DELETE", base, nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("DELETE: %d", resp.StatusCode)
	}
}

// A DNS over HTTPS request waits for a forwarded answer as long as the
// current handler allows: a reload that lengthens forward.deadline
// applies to the next request, so an upstream slower than the old bound
// but inside the new one answers.
func TestDoHWaitFollowsTheHandler(t *testing.T) {
	const upstreamDelay = 2 * time.Second
	upstream := &dns.Server{Addr: "127.0.0.1:0", Net: "udp", Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		time.Sleep(upstreamDelay)
		m := new(dns.Msg)
		m.SetReply(r)
		rr, _ := dns.NewRR(r.Question[0].Name + " 60 IN A 192.0.2.7")
		m.Answer = []dns.RR{rr}
		w.WriteMsg(m)
	})}
	started := make(chan struct{})
	upstream.NotifyStartedFunc = func() { close(started) }
	go upstream.ListenAndServe()
	<-started
	t.Cleanup(func() { upstream.Shutdown() })
	// A DNS over HTTPS question came over TCP, which the forwarder keeps
	// unless told to prefer UDP; this upstream serves UDP alone.
	fwd := forward.New(forward.Config{Upstreams: []string{upstream.PacketConn.LocalAddr().String()}, Policy: "sequential",
		Timeout: 4 * time.Second, MaxConcurrent: 10, HealthCheck: time.Hour, MaxFails: 100, PreferUDP: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(fwd.Close)
	withDeadline := func(d time.Duration) *query.Handler {
		h := testHandler()
		h.Upstream = &query.Upstream{Forwarder: fwd, Deadline: d, Now: time.Now}
		return h
	}
	var handler atomic.Pointer[query.Handler]
	// As started: a deadline the upstream cannot meet (the wait is that
	// and a second of grace).
	handler.Store(withDeadline(100 * time.Millisecond))
	addr, pool := tlsListenerWith(t, "https", &handler, Block{Zones: []string{"."}})
	// Reloaded: a deadline the upstream meets.
	handler.Store(withDeadline(4 * time.Second))

	resp, err := dohClient(pool).Post("https://"+addr+"/dns-query", dohMediaType,
		bytes.NewReader(dohPacked(t, "slow.example.", dns.TypeA)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "192.0.2.7" {
		t.Fatalf("got %s %v, want the upstream's answer", dns.RcodeToString[m.Rcode], m.Answer)
	}
}
