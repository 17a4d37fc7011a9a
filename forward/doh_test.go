package forward

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/internal/testutil"
)

// dohServer is a DNS over HTTPS upstream on loopback (net/http over
// HTTP/2), with a certificate for 127.0.0.1 and localhost that caFile
// trusts. It answers with serve, and records what the queries looked
// like.
type dohServer struct {
	addr     string // IP:port
	caFile   string
	accepted atomic.Int32 // TCP connections
	closed   atomic.Int32 // connections closed

	mu    sync.Mutex
	asked []dohRequest
}

// dohRequest is what the server saw of one query.
type dohRequest struct {
	method, path, proto, host, contentType string
	id                                     uint16
}

func (s *dohServer) requests() []dohRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]dohRequest(nil), s.asked...)
}

// startDoHServer serves reply: the DNS reply to write, or nil to write
// nothing (the handler has answered the HTTP request itself).
func startDoHServer(t *testing.T, reply func(w http.ResponseWriter, r *http.Request, q *dns.Msg) *dns.Msg) *dohServer {
	t.Helper()
	certFile, pair := upstreamCert(t)
	s := &dohServer{caFile: certFile}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		q := new(dns.Msg)
		if err := q.Unpack(body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.asked = append(s.asked, dohRequest{r.Method, r.URL.Path, r.Proto, r.Host, r.Header.Get("Content-Type"), q.Id})
		s.mu.Unlock()
		if m := reply(w, r, q); m != nil {
			writeDNS(w, http.StatusOK, "application/dns-message", m)
		}
	}))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.Listener = countingListener{srv.Listener, &s.accepted}
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			s.closed.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	s.addr = srv.Listener.Addr().String()
	return s
}

// writeDNS writes m as the body of a reply of this status and type.
func writeDNS(w http.ResponseWriter, status int, contentType string, m *dns.Msg) {
	packed, _ := m.Pack()
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write(packed)
}

// dohA answers every question with an A record, as answerA does.
func dohA(_ http.ResponseWriter, _ *http.Request, q *dns.Msg) *dns.Msg { return replyA(q) }

// Queries are POSTs of application/dns-message over HTTP/2 with ID 0,
// at /dns-query, one after another on one connection; the answers carry
// the client's ID.
func TestDoHQueriesOverHTTP2OnOneConnection(t *testing.T) {
	s := startDoHServer(t, dohA)
	c := conns{proto: "https"}
	f := newDoTForwarder(t, TLSFiles{CAFile: s.caFile}, &c, nil, "https://"+s.addr+"/dns-query")
	wantAnswers(t, f, 20)
	if n := s.accepted.Load(); n != 1 {
		t.Errorf("the upstream accepted %d connections for 20 queries, want 1", n)
	}
	if c.opened.Load() != 1 || c.reused.Load() != 19 {
		t.Errorf("counted %d opened and %d reused connections, want 1 and 19", c.opened.Load(), c.reused.Load())
	}
	want := dohRequest{"POST", "/dns-query", "HTTP/2.0", s.addr, "application/dns-message", 0}
	for _, r := range s.requests() {
		if r != want {
			t.Fatalf("request %+v, want %+v", r, want)
		}
	}
}

// The path written is the one asked; with a server name, it is the
// HTTP Host too, as CoreDNS sends it, and the certificate must hold it.
func TestDoHPathAndServerName(t *testing.T) {
	s := startDoHServer(t, dohA)
	f := newDoTForwarder(t, TLSFiles{CAFile: s.caFile, ServerName: "localhost"}, nil, nil, "https://"+s.addr+"/resolve")
	wantA(t, f, "example.org.")
	if r := s.requests(); len(r) != 1 || r[0].path != "/resolve" || r[0].host != "localhost" {
		t.Errorf("requests %+v, want one at /resolve for Host localhost", r)
	}
}

// An upstream that fails is passed over for the next one and marked
// down; the health checks reach it over HTTPS, and keep it down while
// it fails the same way.
func TestDoHFailingUpstreams(t *testing.T) {
	good := startPlainServer(t, false, answerA)
	other := startDoHServer(t, dohA) // only for a CA that is not the failing one's
	for _, c := range []struct {
		name  string
		files func(s *dohServer) TLSFiles
		reply func(w http.ResponseWriter, r *http.Request, q *dns.Msg) *dns.Msg
	}{
		// Both with a DNS message that would parse: the status and the
		// type alone fail them.
		{"HTTP 500", nil, func(w http.ResponseWriter, r *http.Request, q *dns.Msg) *dns.Msg {
			writeDNS(w, http.StatusInternalServerError, "application/dns-message", dohA(w, r, q))
			return nil
		}},
		{"another content type", nil, func(w http.ResponseWriter, r *http.Request, q *dns.Msg) *dns.Msg {
			writeDNS(w, http.StatusOK, "text/html", dohA(w, r, q))
			return nil
		}},
		{"not a DNS message", nil, func(w http.ResponseWriter, _ *http.Request, _ *dns.Msg) *dns.Msg {
			w.Header().Set("Content-Type", "application/dns-message")
			_, _ = io.WriteString(w, "<html>a captive portal</html>")
			return nil
		}},
		{"slower than the timeout", nil, func(_ http.ResponseWriter, r *http.Request, _ *dns.Msg) *dns.Msg {
			<-r.Context().Done() // the client gave up
			return nil
		}},
		{"certificate from another CA", func(*dohServer) TLSFiles { return TLSFiles{CAFile: other.caFile} }, dohA},
		{"certificate for another name", func(s *dohServer) TLSFiles { return TLSFiles{CAFile: s.caFile, ServerName: "dns.example.org"} }, dohA},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := startDoHServer(t, c.reply)
			files := TLSFiles{CAFile: bad.caFile}
			if c.files != nil {
				files = c.files(bad)
			}
			f := newDoTForwarder(t, files, nil, func(cfg *Config) { cfg.Timeout = 200 * time.Millisecond }, "https://"+bad.addr)
			for range 2 {
				if r, err := askA(f, "example.org."); err == nil {
					t.Fatalf("a failing upstream answered: %v", r)
				}
			}
			if f.Healthy() != 0 {
				t.Fatal("the failing upstream is not marked down")
			}
			probed := bad.accepted.Load() + int32(len(bad.requests()))
			testutil.Eventually(t, 5*time.Second, func() error {
				if bad.accepted.Load()+int32(len(bad.requests())) < probed+2 {
					return fmt.Errorf("no health check reached the upstream")
				}
				return nil
			})
			if f.Healthy() != 0 {
				t.Fatal("a health check passed on an upstream that fails")
			}
			// Before a working upstream, it is passed over.
			pair := newDoTForwarder(t, files, nil, func(cfg *Config) { cfg.Timeout = 200 * time.Millisecond },
				"https://"+bad.addr, good.addr)
			wantA(t, pair, "example.org.")
		})
	}
}

// An upstream marked down is put back once it answers over HTTPS.
func TestDoHUpstreamBackUp(t *testing.T) {
	var broken atomic.Bool
	broken.Store(true)
	s := startDoHServer(t, func(w http.ResponseWriter, r *http.Request, q *dns.Msg) *dns.Msg {
		if broken.Load() {
			http.Error(w, "broken", http.StatusServiceUnavailable)
			return nil
		}
		return dohA(w, r, q)
	})
	f := newDoTForwarder(t, TLSFiles{CAFile: s.caFile}, nil, nil, "https://"+s.addr)
	for range 2 {
		if _, err := askA(f, "example.org."); err == nil || !strings.Contains(err.Error(), "no upstream") {
			t.Fatalf("a 503 answered: %v", err)
		}
	}
	if f.Healthy() != 0 {
		t.Fatal("the upstream is not marked down")
	}
	broken.Store(false)
	testutil.Eventually(t, 5*time.Second, func() error {
		if f.Healthy() != 1 {
			return fmt.Errorf("the upstream answers and is still marked down")
		}
		return nil
	})
	wantA(t, f, "example.org.")
}

// An idle connection is closed once idle for expire; with expire 0
// none is kept.
func TestDoHIdleConnectionExpires(t *testing.T) {
	s := startDoHServer(t, dohA)
	f := newDoTForwarder(t, TLSFiles{CAFile: s.caFile}, nil, func(c *Config) { c.Expire = 50 * time.Millisecond }, "https://"+s.addr)
	wantA(t, f, "example.org.")
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := s.closed.Load(); n != 1 {
			return fmt.Errorf("%d connections closed after expire, want 1", n)
		}
		return nil
	})
	wantA(t, f, "example.org.")
	if n := s.accepted.Load(); n != 2 {
		t.Errorf("%d connections, want 2: the expired one replaced", n)
	}

	none := startDoHServer(t, dohA)
	f = newDoTForwarder(t, TLSFiles{CAFile: none.caFile}, nil, func(c *Config) { c.Expire = 0 }, "https://"+none.addr)
	wantAnswers(t, f, 3)
	if n := none.accepted.Load(); n != 3 {
		t.Errorf("expire 0: %d connections for 3 queries, want 3", n)
	}
}
