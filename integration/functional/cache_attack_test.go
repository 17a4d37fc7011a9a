package functional

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// A pod that controls a domain (its own authoritative server, reached
// through the cluster's upstream) can make every name under it answer
// with 64 KiB: the forwarder's cache holds what its upstream sends, so it
// is bounded in bytes, not only in entries (cache.maxBytes).

// TestHostileCacheFill asks a replica 4,000 names of a domain whose
// server answers each with about 50 KB of TXT records: 10,000 entries of
// that size would be 200 MB of answers, and more in memory.
func TestHostileCacheFill(t *testing.T) {
	upstream := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	h := startHostileTarget(t, fmt.Sprintf("forward: {upstreams: [%q]}\n", upstream))
	r := runHostile(t, h, hostileSpec{Kind: "cache-fill", Target: h.p.Addr, Conns: 4000, Size: 50000,
		Files: map[string]string{"upstream": upstream}}, 3*time.Second)
	r.check(t, 32)
	if r.Opened < 3000 {
		t.Errorf("only %d of 4,000 large answers came back: the attack did not fill the cache", r.Opened)
	}
	// 8Mi (cache.maxBytes) holds about 110 answers of 50 KB and 190
	// records each; entries alone (cache.size 10,000) would hold them all.
	if held := harness.MetricSum(t, h.http, "shardns_cache_entries", `type="all"`); held == 0 || held > 200 {
		t.Errorf("the cache holds %v answers after 4,000 large ones, want some, and at most 200", held)
	}
}

// cacheFill serves every name under attack.test. from s.Files["upstream"]
// with TXT records of s.Size bytes in all (truncated over UDP, whole over
// TCP, as an authoritative server does), then asks s.Target s.Conns
// names under it over TCP, 16 at a time, and reports how many large
// answers came back.
func cacheFill(ctx context.Context, s hostileSpec, ready func(int64)) error {
	stop, err := serveLargeAnswers(s.Files["upstream"], s.Size)
	if err != nil {
		return err
	}
	defer stop()
	var answered sync.WaitGroup
	var mu sync.Mutex
	var large int64
	sem := make(chan struct{}, 16)
	for i := range s.Conns {
		sem <- struct{}{}
		answered.Go(func() {
			defer func() { <-sem }()
			m, err := testutil.Exchange(s.Target, "tcp", "n"+strconv.Itoa(i)+".big.attack.test.", dns.TypeTXT)
			if err == nil && m.Len() > s.Size/2 {
				mu.Lock()
				large++
				mu.Unlock()
			}
		})
	}
	answered.Wait()
	ready(large)
	<-ctx.Done()
	return nil
}

// serveLargeAnswers starts an authoritative server on addr (UDP and TCP)
// that answers any name with TXT records of about size bytes in all.
func serveLargeAnswers(addr string, size int) (stop func(), err error) {
	chunk := strings.Repeat("x", 250)
	handler := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		m.Authoritative = true
		if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
			m.Truncated = true // too large for UDP: ask over TCP
		} else {
			for range size / (len(chunk) + 16) {
				m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: q.Question[0].Name,
					Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 300}, Txt: []string{chunk}})
			}
		}
		w.WriteMsg(m)
	})
	udp := &dns.Server{Addr: addr, Net: "udp", Handler: handler}
	tcp := &dns.Server{Addr: addr, Net: "tcp", Handler: handler}
	started := make(chan error, 2)
	for _, srv := range []*dns.Server{udp, tcp} {
		srv.NotifyStartedFunc = func() { started <- nil }
		go func() {
			if err := srv.ListenAndServe(); err != nil {
				started <- err
			}
		}()
	}
	for range 2 {
		if err := <-started; err != nil {
			udp.Shutdown()
			tcp.Shutdown()
			return nil, err
		}
	}
	return func() { udp.Shutdown(); tcp.Shutdown() }, nil
}
