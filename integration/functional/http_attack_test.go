package functional

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardns/shardns/integration/harness"
)

// The HTTP API (http.listen: /health, /ready, /metrics) is reachable by
// every pod (:8080, kube-dns:9153) and, for a node-local process on the
// host network, by anything that reaches the node (:9254). Requests that
// never finish must not hold the replica's memory, nor lock out the
// kubelet's probes and Prometheus's scrapes.

// TestHTTPSlowHeaders holds thousands of HTTP requests that send a
// request line and one header and never finish, from one process, while a
// fresh client asks /health, /ready and /metrics: the replica's memory
// stays within budget, every probe is answered, and the connections
// closed to make room are counted. SHARDNS_HTTP_ATTACK_CONNS sets the
// number of connections (4,000 by default).
func TestHTTPSlowHeaders(t *testing.T) {
	conns := 4000
	if v, err := strconv.Atoi(os.Getenv("SHARDNS_HTTP_ATTACK_CONNS")); err == nil && v > 0 {
		conns = v
	}
	h := startHostileTarget(t, "")
	probes := probeHTTP(h.http)
	r := runHostile(t, h, hostileSpec{Kind: "http-slow-headers", Target: h.http, Conns: conns}, 10*time.Second)
	probes.check(t, "HTTP (/health, /ready, /metrics)")
	r.check(t, 32)
	evicted := harness.MetricSum(t, h.http, "shardns_http_evicted_total", "")
	timedOut := harness.MetricSum(t, h.http, "shardns_http_timeouts_total", `reason="read"`)
	t.Logf("connections closed to make room: %.0f; requests timed out: %.0f", evicted, timedOut)
	if evicted+timedOut == 0 {
		t.Errorf("%d unfinished requests closed none: shardns_http_evicted_total and shardns_http_timeouts_total{reason=\"read\"} are 0", r.Opened)
	}
}

// probeHTTP asks /health, /ready and /metrics from a fresh connection
// every 0.25 s, as the kubelet and a Prometheus that just started would.
func probeHTTP(addr string) *prober {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	return probeEvery(func() error {
		for _, path := range []string{"/health", "/ready", "/metrics"} {
			if err := probeOnce(client, "http://"+addr+path); err != nil {
				return err
			}
		}
		return nil
	})
}

func probeOnce(client *http.Client, url string) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// httpAttackSources are the addresses the attacker's connections come
// from, in turn, as from 64 pods: more than the server's bound for one
// client address fills, so that its bound over all of them is reached
// too. The probes come from 127.0.0.1, as the kubelet's from the node.
const httpAttackSources = 64

// httpSlowHeaders opens s.Conns connections to s.Target, each sending a
// request line and one header of a request it never finishes. A
// connection the server closes is opened again a second later, as an
// attacker keeping up the pressure would.
func httpSlowHeaders(ctx context.Context, s hostileSpec, ready func(int64)) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	var opened atomic.Int64
	sem := make(chan struct{}, 32)
	for i := range s.Conns {
		sem <- struct{}{}
		wg.Go(func() {
			c := dialFrom(ctx, i, s.Target)
			<-sem
			if c != nil {
				opened.Add(1)
			}
			holdUnfinished(ctx, i, s.Target, c)
		})
	}
	for range cap(sem) { // every dial has returned
		sem <- struct{}{}
	}
	if opened.Load() == 0 {
		return fmt.Errorf("no connection to %s opened", s.Target)
	}
	ready(opened.Load())
	<-ctx.Done()
	return nil
}

// dialFrom dials addr from the i-th attacker address; nil if it fails.
func dialFrom(ctx context.Context, i int, addr string) net.Conn {
	src := &net.TCPAddr{IP: net.IPv4(127, 0, 1, byte(1+i%httpAttackSources))}
	d := net.Dialer{LocalAddr: src, Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	return c
}

// holdUnfinished holds the start of a request on c until the server
// closes it, then does the same on a new connection a second later,
// until ctx ends.
func holdUnfinished(ctx context.Context, i int, addr string, c net.Conn) {
	for {
		if c != nil {
			holdOne(ctx, c)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		c = dialFrom(ctx, i, addr)
	}
}

// holdOne writes a request line and one header on c and reads until the
// server closes c or ctx ends.
func holdOne(ctx context.Context, c net.Conn) {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	defer c.Close()
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: shardns\r\n"); err == nil {
		io.Copy(io.Discard, c)
	}
}
