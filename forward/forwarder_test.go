package forward

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/internal/testutil"
)

// An upstream that fails MaxFails times in a row is marked down, probed
// every HealthCheck, and put back as soon as it answers.
func TestUpstreamDownIsProbedUntilItAnswers(t *testing.T) {
	// A loopback port with nothing on it: the kernel refuses at once.
	reserved, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := reserved.LocalAddr().String()
	reserved.Close()

	f := New(Config{Upstreams: []string{addr}, Policy: "sequential", Timeout: time.Second,
		MaxConcurrent: 10, HealthCheck: 20 * time.Millisecond, MaxFails: 2, Logger: slog.New(slog.DiscardHandler)})
	defer f.Close()
	ask := func() (*dns.Msg, error) {
		q := new(dns.Msg)
		q.SetQuestion("example.org.", dns.TypeA)
		return f.Exchange(context.Background(), q)
	}
	for range 2 {
		if r, err := ask(); err == nil {
			t.Fatalf("a closed port answered: %v", r)
		}
	}
	if n := f.Healthy(); n != 0 {
		t.Fatalf("%d upstreams healthy after 2 failures with MaxFails 2, want 0", n)
	}

	// serve starts a real DNS server at the upstream's address, answering
	// NXDOMAIN to everything, until it is shut down or the test ends.
	serve := func() *dns.Server {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Skipf("the upstream's port was taken meanwhile: %v", err)
		}
		server := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
			m := new(dns.Msg)
			m.SetRcode(r, dns.RcodeNameError)
			_ = w.WriteMsg(m)
		})}
		go func() { _ = server.ActivateAndServe() }()
		t.Cleanup(func() { _ = server.Shutdown() })
		return server
	}
	backUp := func() {
		t.Helper()
		testutil.Eventually(t, 10*time.Second, func() error {
			if f.Healthy() != 1 {
				return fmt.Errorf("the upstream answers and is still marked down")
			}
			return nil
		})
	}

	server := serve()
	backUp()
	r, err := ask()
	if err != nil || r.Rcode != dns.RcodeNameError {
		t.Fatalf("the upstream back up: %v, %v; want its NXDOMAIN", r, err)
	}

	// Marked down again, it is probed again.
	_ = server.Shutdown()
	for range 2 {
		if _, err := ask(); err == nil {
			t.Fatal("a stopped upstream answered")
		}
	}
	if n := f.Healthy(); n != 0 {
		t.Fatalf("%d upstreams healthy after the second failures, want 0", n)
	}
	serve()
	backUp()
}
