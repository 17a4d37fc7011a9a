package listeners

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// pipelined is how many questions a pipelining client has in flight on
// one connection: dnsperf -c 4 -q 200 keeps 50 on each.
const pipelined = 50

// BenchmarkServeTCPPipelined is a client that writes 50 questions at
// once on one kept TCP connection and reads their 50 answers: what a
// busy resolver or dnsperf sends. An op is the 50; ns/question is the
// cost of one.
func BenchmarkServeTCPPipelined(b *testing.B) {
	addr := startListener(b, 16, time.Minute)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	benchStream(b, c, pipelined)
}

// BenchmarkServeDoT is one question at a time on one kept DNS over TLS
// connection.
func BenchmarkServeDoT(b *testing.B) { benchStream(b, dialDoT(b), 1) }

// BenchmarkServeDoTPipelined is BenchmarkServeTCPPipelined over DNS over
// TLS, each question its own TLS record as a client writing them one by
// one sends them.
func BenchmarkServeDoTPipelined(b *testing.B) { benchStream(b, dialDoT(b), pipelined) }

// dialDoT opens a DNS over TLS connection to a listener serving the test
// zone, closed when the benchmark ends.
func dialDoT(b *testing.B) net.Conn {
	addr, pool := tlsListenerConfig(b, "tls", Config{MaxConnections: 16, IdleTimeout: time.Minute})
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"dot"}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// benchStream asks n questions at a time on c, each written as its own
// frame in one write (a TLS connection seals each as its own record),
// and reads their answers through a buffer, so that the client's own
// calls are few and allocate nothing.
func benchStream(b *testing.B, c net.Conn, n int) {
	m := new(dns.Msg)
	m.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
	q, _ := m.Pack()
	frame := binary.BigEndian.AppendUint16(nil, uint16(len(q)))
	frame = append(frame, q...)
	var batch []byte
	if _, ok := c.(*tls.Conn); !ok {
		for range n {
			batch = append(batch, frame...)
		}
	}
	r := bufio.NewReaderSize(c, 64<<10)
	resp := make([]byte, dns.MaxMsgSize)
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		if batch != nil {
			if _, err := c.Write(batch); err != nil {
				b.Fatal(err)
			}
		} else {
			for range n {
				if _, err := c.Write(frame); err != nil {
					b.Fatal(err)
				}
			}
		}
		for range n {
			if _, err := io.ReadFull(r, resp[:2]); err != nil {
				b.Fatal(err)
			}
			size := binary.BigEndian.Uint16(resp)
			if _, err := io.ReadFull(r, resp[:size]); err != nil {
				b.Fatal(err)
			}
			if resp[3]&0xf != dns.RcodeSuccess {
				b.Fatalf("rcode %d", resp[3]&0xf)
			}
		}
	}
	questions := float64(b.N * n)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/questions, "ns/question")
	b.ReportMetric(float64((cpuTime(b)-cpu0).Nanoseconds())/questions, "cpu-ns/question")
}

// cpuTime is the CPU the process has used, user and system, server and
// client: on a machine shared with other work it varies less from run to
// run than the time elapsed.
func cpuTime(b *testing.B) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		b.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
