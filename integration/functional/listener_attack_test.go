package functional

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// The DNS listeners over TCP, TLS and HTTPS are reachable by every client
// of the cluster's DNS. A message that declares its length and then
// trickles must cost the replica little until it is complete, however
// many of them are held, and clients that ask through the attack get
// their answers.

// listenerTarget is a hostile target that also serves DNS over TLS and
// DNS over HTTPS, and the pool trusting their certificate.
type listenerTarget struct {
	*hostileTarget
	dot, doh string
	pool     *x509.CertPool
}

func startListenerTarget(t *testing.T) *listenerTarget {
	t.Helper()
	certFile, keyFile, cert := testutil.WriteCert(t, t.TempDir(), "dns", "localhost")
	l := &listenerTarget{pool: x509.NewCertPool()}
	l.pool.AddCert(cert)
	keys := fmt.Sprintf("tls: {certFile: %q, keyFile: %q}", certFile, keyFile)
	dot, doh := harness.FreePort(t), harness.FreePort(t)
	l.hostileTarget = startHostileTarget(t, fmt.Sprintf(`servers:
- {listen: ["127.0.0.1:%d"], transport: tls, %s}
- {listen: ["127.0.0.1:%d"], transport: https, %s}
`, dot, keys, doh, keys))
	l.dot, l.doh = fmt.Sprintf("127.0.0.1:%d", dot), fmt.Sprintf("127.0.0.1:%d", doh)
	return l
}

// TestDoHSlowBodies holds HTTP/2 POST streams whose bodies declare 65,535
// bytes and send all but the last, as measured in issue 55 (20
// connections of 100 streams) and heavier (50 connections of 250, Go's
// default stream limit), while a DNS over HTTPS client keeps asking.
func TestDoHSlowBodies(t *testing.T) {
	for _, c := range []struct{ conns, streams int }{{20, 100}, {50, 250}} {
		t.Run(fmt.Sprintf("%dx%d", c.conns, c.streams), func(t *testing.T) {
			l := startListenerTarget(t)
			client := probeEvery(func() error {
				m, err := harness.ExchangeDoH(l.doh, "127.0.0.1", hostileQuestion, l.pool)
				return isHostileAnswer(m, err)
			})
			r := runHostile(t, l.hostileTarget, hostileSpec{Kind: "doh-slow-bodies", Target: l.doh,
				Conns: c.conns, Streams: c.streams, Size: dns.MaxMsgSize}, 10*time.Second)
			client.check(t, "DNS over HTTPS")
			r.check(t, 32)
			logAttackerNotes(t, r)
			refused := map[string]float64{}
			for _, reason := range []string{"streams", "inflight", "evicted", "body_timeout"} {
				refused[reason] = harness.MetricSum(t, l.http, "shardns_dns_https_refused_total", `reason="`+reason+`"`)
			}
			t.Logf("shardns_dns_https_refused_total: %v", refused)
			if refused["streams"] == 0 {
				t.Errorf("%d streams a connection, over the stream limit: none counted as refused", c.streams)
			}
			if refused["evicted"]+refused["body_timeout"] == 0 {
				t.Errorf("%d trickling bodies: none counted as evicted or timed out", r.Opened)
			}
		})
	}
}

// TestTCPSlowMessages holds 1,000 connections to the plain TCP and the
// DNS over TLS listeners (from 8 addresses, within the per-source bound),
// each sending a length prefix of 65,535 and all of the message but its
// last byte, while clients keep asking over TCP and TLS.
func TestTCPSlowMessages(t *testing.T) {
	for _, transport := range []string{"tcp", "tls"} {
		t.Run(transport, func(t *testing.T) {
			l := startListenerTarget(t)
			target, files := l.p.Addr, map[string]string(nil)
			if transport == "tls" {
				target, files = l.dot, map[string]string{"tls": "dot"}
			}
			tcp := probeEvery(func() error {
				return isHostileAnswer(testutil.Exchange(l.p.Addr, "tcp", hostileQuestion, dns.TypeA))
			})
			dot := probeEvery(func() error { return isHostileAnswer(exchangeDoT(l.dot, hostileQuestion, l.pool)) })
			r := runHostile(t, l.hostileTarget, hostileSpec{Kind: "tcp-slow-messages", Target: target, Conns: 1000,
				Size: dns.MaxMsgSize, Files: files}, 10*time.Second)
			tcp.check(t, "TCP")
			dot.check(t, "DNS over TLS")
			r.check(t, 32)
			evicted := harness.MetricSum(t, l.http, "shardns_dns_tcp_evicted_total", `reason="buffer"`)
			t.Logf("shardns_dns_tcp_evicted_total{reason=\"buffer\"}: %.0f", evicted)
			if evicted == 0 {
				t.Errorf("1000 messages of 64 KiB held at once closed none: shardns_dns_tcp_evicted_total{reason=\"buffer\"} is 0")
			}
		})
	}
}

// tcpSlowMessages opens s.Conns connections to s.Target (over TLS when
// s.Files["tls"] is set) from 8 loopback addresses, and on each sends a
// length prefix of s.Size and all of the message but its last byte.
func tcpSlowMessages(ctx context.Context, s hostileSpec, ready func(int64)) error {
	msg := make([]byte, 2+s.Size-1)
	msg[0], msg[1] = byte(s.Size>>8), byte(s.Size)
	var mu sync.Mutex
	var conns []net.Conn
	var firstErr error
	var sent atomic.Int64
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := range s.Conns {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(1+i%8))}}
			c, err := d.DialContext(ctx, "tcp", s.Target)
			if err == nil && s.Files["tls"] != "" {
				tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"dot"}})
				c, err = tc, tc.HandshakeContext(ctx)
			}
			if err == nil {
				_, err = c.Write(msg)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				if c != nil {
					c.Close()
				}
				return
			}
			sent.Add(1)
			conns = append(conns, c)
		})
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	if sent.Load() == 0 {
		return firstErr
	}
	ready(sent.Load())
	<-ctx.Done()
	return nil
}

// exchangeDoT asks name over DNS over TLS.
func exchangeDoT(addr, name string, pool *x509.CertPool) (*dns.Msg, error) {
	c := &dns.Client{Net: "tcp-tls", Timeout: 2 * time.Second,
		TLSConfig: &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"dot"}}}
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	r, _, err := c.Exchange(m, addr)
	return r, err
}

// isHostileAnswer is nil when m is the answer the harness's question gets.
func isHostileAnswer(m *dns.Msg, err error) error {
	if err != nil {
		return err
	}
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != hostileAnswer {
		return fmt.Errorf("%s: %s %v", hostileQuestion, dns.RcodeToString[m.Rcode], m.Answer)
	}
	return nil
}

// logAttackerNotes logs the lines the attacker printed about what the
// server did to it.
func logAttackerNotes(t *testing.T, r hostileReport) {
	for _, line := range strings.Split(r.AttackerErrOutput, "\n") {
		if strings.HasPrefix(line, "hostile note:") {
			t.Log(line)
		}
	}
}
