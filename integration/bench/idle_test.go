package bench

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// idleConfig serves the demo cluster on plain DNS, DNS over TLS and DNS
// over HTTPS with the default connection bounds (1,024 per listener, 256
// per source and listener) and a 5 s idle timeout.
func idleConfig(dns, dot, doh int, certFile, keyFile string) string {
	keys := fmt.Sprintf("tls: {certFile: %q, keyFile: %q}", certFile, keyFile)
	return fmt.Sprintf(`dns:
  listen: ["127.0.0.1:%d"]
  tcpIdleTimeout: 5s
http: {listen: "127.0.0.1:0", lameduck: 0s}
kubernetes: {enabled: false}
manifests: {files: [demo-cluster.yaml]}
cluster: {replicationFactor: 0}
forward: {upstreams: []}
servers:
- {listen: ["127.0.0.1:%d"], transport: tls, %s}
- {listen: ["127.0.0.1:%d"], transport: https, %s}
`, dns, dot, keys, doh, keys)
}

// 11,000 idle connections (opened, nothing sent) to the plain, TLS and
// HTTPS listeners, 10,000 from 40 addresses and 1,000 from one greedy
// address, do not stop a client asking 1,000 questions a second over UDP
// nor new clients over TCP, TLS and HTTPS, the greedy address's own
// included. The server keeps its connections within its bounds (closing
// the idlest, counted by reason), and closes what stays idle.
func TestIdleConnections(t *testing.T) {
	dir := t.TempDir()
	demo, err := os.ReadFile("../../deploy/local/demo-cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, filepath.Join(dir, "demo-cluster.yaml"), demo)
	certFile, keyFile, cert := testutil.WriteCert(t, dir, "dns", "localhost")
	dnsPort, dotPort, dohPort := harness.FreePort(t), harness.FreePort(t), harness.FreePort(t)
	writeAt(t, filepath.Join(dir, "shardns.yaml"), []byte(idleConfig(dnsPort, dotPort, dohPort, certFile, keyFile)))
	server := harness.Start(t, harness.Options{Args: []string{"--config", filepath.Join(dir, "shardns.yaml")}})
	server.WaitReady(t)
	metrics := server.HTTPAddr(t)
	plain := fmt.Sprintf("127.0.0.1:%d", dnsPort)
	dot := fmt.Sprintf("127.0.0.1:%d", dotPort)
	doh := fmt.Sprintf("127.0.0.1:%d", dohPort)
	pid := server.Cmd.Process.Pid
	before := openFiles(t, pid)

	ctx, stopLegit := context.WithCancel(context.Background())
	defer stopLegit()
	var legit legitResult
	var legitDone sync.WaitGroup
	legitDone.Go(func() { legit = legitimateClient(ctx, t, "127.0.20.1", plain) })

	// The server's open files, sampled while the idle connections open.
	var most atomic.Int64
	sampling, stopSampling := context.WithCancel(context.Background())
	var sampled sync.WaitGroup
	sampled.Go(func() {
		for sampling.Err() == nil {
			most.Store(max(most.Load(), int64(openFiles(t, pid))))
			time.Sleep(20 * time.Millisecond) // a sampling period, not a wait for an event
		}
	})
	idle := openIdle(t, []string{plain, dot, doh})
	stopSampling()
	sampled.Wait()
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	t.Logf("%d idle connections open; the server held at most %d files (%d before)", len(idle), most.Load(), before)
	// Each listener holds 1,024 connections at most, whoever opens them.
	if bound := int64(before + 3*1024 + 64); most.Load() > bound {
		t.Errorf("the server held %d files while idle connections opened, want at most %d", most.Load(), bound)
	}

	// New clients, over every transport, the greedy address among them.
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	name, ip := legitimateNames[2].name, legitimateNames[2].ip
	clients := []struct {
		what string
		ask  func() (*dns.Msg, error)
	}{
		{"tcp", func() (*dns.Msg, error) { return exchangeFrom(plain, "tcp", "127.0.21.1", name, nil) }},
		{"tcp from the greedy address", func() (*dns.Msg, error) { return exchangeFrom(plain, "tcp", "127.0.41.1", name, nil) }},
		{"tls", func() (*dns.Msg, error) {
			return exchangeFrom(dot, "tcp-tls", "127.0.21.2", name, &tls.Config{RootCAs: pool, ServerName: "localhost"})
		}},
		{"https", func() (*dns.Msg, error) { return harness.ExchangeDoH(doh, "127.0.21.3", name, pool) }},
	}
	for _, c := range clients {
		for i := range 20 {
			r, err := c.ask()
			if err == nil {
				err = isAddress(r, ip)
			}
			if err != nil {
				t.Fatalf("a new client over %s, question %d, beside the idle connections: %v", c.what, i, err)
			}
		}
	}
	if full := harness.ScrapeLabelled(t, metrics, "shardns_dns_tcp_evicted_total", `reason="full"`); full == 0 {
		t.Error("no connection closed for a full listener")
	}
	if own := harness.ScrapeLabelled(t, metrics, "shardns_dns_tcp_evicted_total", `reason="source"`); own == 0 {
		t.Error("no connection of the greedy address closed for its own bound")
	}
	// What stays idle is closed after dns.tcpIdleTimeout.
	testutil.Eventually(t, 30*time.Second, func() error {
		if n := openFiles(t, pid); n > before+16 {
			return fmt.Errorf("the server holds %d files, %d before the idle connections", n, before)
		}
		return nil
	})
	// The UDP client asked throughout: while the connections opened, the
	// new clients asked and the idle ones timed out.
	stopLegit()
	legitDone.Wait()
	t.Logf("legitimate UDP client: %v (last error: %v)", legit, legit.last)
	checkLegitimate(t, legit)
}

// openIdle opens idle connections to addrs in turn: 250 from each of 40
// addresses, and 1,000 to the first address from one greedy address.
// Some are closed by the server as others open; they stay open here.
func openIdle(t *testing.T, addrs []string) []net.Conn {
	t.Helper()
	type batch struct {
		from  string
		count int
		to    []string
	}
	var batches []batch
	for i := range 40 {
		batches = append(batches, batch{fmt.Sprintf("127.0.40.%d", i+1), 250, addrs})
	}
	batches = append(batches, batch{"127.0.41.1", 1000, addrs[:1]})
	var mu sync.Mutex
	var conns []net.Conn
	var failed error
	var wg sync.WaitGroup
	for _, b := range batches {
		wg.Go(func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(b.from)}, Timeout: 5 * time.Second}
			for i := range b.count {
				c, err := d.Dial("tcp", b.to[i%len(b.to)])
				mu.Lock()
				if err != nil {
					failed = err
				} else {
					conns = append(conns, c)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed != nil {
		for _, c := range conns {
			c.Close()
		}
		t.Fatalf("opening idle connections: %v", failed)
	}
	return conns
}

// exchangeFrom asks name's A over a new connection of network (tcp or
// tcp-tls) from the address from.
func exchangeFrom(addr, network, from, name string, tlsConfig *tls.Config) (*dns.Msg, error) {
	c := &dns.Client{Net: network, Timeout: 2 * time.Second, TLSConfig: tlsConfig,
		Dialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 2 * time.Second}}
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	r, _, err := c.Exchange(m, addr)
	return r, err
}

// openFiles counts the open files of process pid.
func openFiles(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatalf("reading the server's open files: %v", err)
	}
	return len(entries)
}
