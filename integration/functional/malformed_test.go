package functional

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// The built binary takes 100k random and crafted malformed packets over
// UDP and TCP; the crafted ones get CoreDNS's rcodes (or are dropped),
// and afterwards the same process still answers 20 of 20 good queries
// over each transport, having recovered no panic.
func TestMalformedPackets(t *testing.T) {
	p := harness.Start(t, harness.Options{Config: harness.DemoConfig})
	p.WaitReady(t)
	httpAddr := p.HTTPAddr(t)

	t.Run("crafted", func(t *testing.T) {
		for _, c := range craftedCases(t) {
			for _, proto := range []string{"udp", "tcp"} {
				if c.udpOnly && proto == "tcp" {
					continue
				}
				r, err := exchangeRaw(p.Addr, proto, c.req)
				if err != nil {
					t.Errorf("%s over %s: %v", c.name, proto, err)
					continue
				}
				if !slicesContain(c.rcodes, r.Rcode) {
					t.Errorf("%s over %s: rcode %s, want %s", c.name, proto, dns.RcodeToString[r.Rcode], rcodeNames(c.rcodes))
				}
				if r.Id != craftedID {
					t.Errorf("%s over %s: id %d, want the request's %d", c.name, proto, r.Id, craftedID)
				}
				if c.check != nil {
					if err := c.check(r, proto); err != nil {
						t.Errorf("%s over %s: %v", c.name, proto, err)
					}
				}
			}
		}
	})

	t.Run("dropped", func(t *testing.T) {
		// Too short for a header, or a response: dropped without an
		// answer, counted as malformed. Nothing else is sent meanwhile,
		// so the counter says exactly what happened to these.
		good := packQuery(t, "frontend.shop.svc.cluster.local.", dns.TypeA)
		response := append([]byte(nil), good...)
		response[2] |= 0x80
		drops := [][]byte{{}, {0x12}, good[:11], response}
		before := harness.ScrapeLabelled(t, httpAddr, `shardns_dns_dropped_total`, `reason="malformed"`)
		conn, err := net.Dial("udp", p.Addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		for _, d := range drops {
			if _, err := conn.Write(d); err != nil {
				t.Fatal(err)
			}
		}
		testutil.Eventually(t, 10*time.Second, func() error {
			if n := harness.ScrapeLabelled(t, httpAddr, `shardns_dns_dropped_total`, `reason="malformed"`) - before; n != float64(len(drops)) {
				return fmt.Errorf("%v packets dropped as malformed, want %d", n, len(drops))
			}
			return nil
		})
	})

	t.Run("flood", func(t *testing.T) {
		seed := uint64(time.Now().UnixNano())
		t.Logf("random packets from seed %d", seed)
		gen := newPacketGen(t, seed)
		seen := func() float64 {
			return harness.ScrapeLabelled(t, httpAddr, "shardns_dns_responses_total", "") +
				harness.ScrapeLabelled(t, httpAddr, "shardns_dns_dropped_total", "")
		}
		before := seen()
		floodUDP(t, p.Addr, gen, 98_000)
		floodTCP(t, p.Addr, gen, 40, 50)
		// Some datagrams may be lost in the kernel's buffers, but most
		// must have reached the server: otherwise this tested nothing.
		handled := seen() - before
		t.Logf("the server answered or dropped %v packets", handled)
		if handled < 50_000 {
			t.Fatalf("only %v of 100000 packets reached the server", handled)
		}
	})

	for _, proto := range []string{"udp", "tcp"} {
		good := 0
		for range 20 {
			r, err := testutil.Exchange(p.Addr, proto, "frontend.shop.svc.cluster.local.", dns.TypeA)
			if err == nil && r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1 &&
				r.Answer[0].(*dns.A).A.String() == "10.96.10.10" {
				good++
			}
		}
		if good != 20 {
			t.Errorf("after the flood: %d of 20 good answers over %s", good, proto)
		}
	}
	select {
	case err := <-p.Done:
		t.Fatalf("shardns exited: %v", err)
	default:
	}
	if n := harness.Scrape(t, httpAddr, "shardns_panics_total"); n != 0 {
		t.Errorf("%v panics recovered while answering", n)
	}
}

const craftedID = 4242

type craftedCase struct {
	name   string
	req    []byte
	rcodes []int
	check  func(r *dns.Msg, proto string) error
	// udpOnly: over TCP the same packet is legitimate (a zone transfer).
	udpOnly bool
}

func packQuery(t *testing.T, name string, qtype uint16) []byte {
	t.Helper()
	return packMsg(t, question(name, qtype))
}

func question(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id = craftedID
	return m
}

func packMsg(t *testing.T, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// craftedCases is the hostile-input table of the query tests, plus what
// only a full packet shows (name over 255 bytes, EDNS buffer capped).
func craftedCases(t *testing.T) []craftedCase {
	good := packQuery(t, "frontend.shop.svc.cluster.local.", dns.TypeA)
	header := func(mut func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		mut(b)
		return b
	}
	two := question("frontend.shop.svc.cluster.local.", dns.TypeA)
	two.Question = append(two.Question, two.Question[0])
	opcode := func(op int) []byte {
		m := question("cluster.local.", dns.TypeSOA)
		m.Opcode = op
		return packMsg(t, m)
	}
	chaos := question("version.bind.", dns.TypeTXT)
	chaos.Question[0].Qclass = dns.ClassCHAOS
	ednsV1 := question("frontend.shop.svc.cluster.local.", dns.TypeA)
	ednsV1.SetEdns0(1232, false)
	ednsV1.IsEdns0().SetVersion(1)
	bigBuffer := question("postgres.data.svc.cluster.local.", dns.TypeA)
	bigBuffer.SetEdns0(65535, false)
	// Compression pointers: a name pointing at itself, and two names
	// pointing at each other.
	selfLoop := append(append([]byte(nil), good[:12]...), 0xC0, 12, 0, 1, 0, 1)
	mutualLoop := append(append([]byte(nil), good[:12]...), 1, 'a', 0xC0, 16, 0xC0, 12, 0, 1, 0, 1)
	// Labels: one of 64 bytes; five of 63 (a name of 321 bytes).
	longLabel := append(append(append([]byte(nil), good[:12]...), 64), make([]byte, 64+5)...)
	for i := 13; i < 13+64; i++ {
		longLabel[i] = 'a'
	}
	longName := append([]byte(nil), good[:12]...)
	for range 5 {
		longName = append(longName, 63)
		longName = append(longName, []byte(strings.Repeat("a", 63))...)
	}
	longName = append(longName, 0, 0, 1, 0, 1)

	formerr, refused := []int{dns.RcodeFormatError}, []int{dns.RcodeRefused}
	return []craftedCase{
		{name: "qdcount 0", req: header(func(b []byte) { b[5] = 0 }), rcodes: formerr},
		{name: "qdcount 2", req: packMsg(t, two), rcodes: formerr},
		{name: "question cut short", req: good[:len(good)-3], rcodes: formerr},
		{name: "compression loop to itself", req: selfLoop, rcodes: formerr},
		{name: "compression loop between two names", req: mutualLoop, rcodes: formerr},
		{name: "label of 64 bytes", req: longLabel, rcodes: formerr},
		{name: "name of 321 bytes", req: longName, rcodes: formerr},
		{name: "opcode update", req: opcode(dns.OpcodeUpdate), rcodes: []int{dns.RcodeNotImplemented}},
		{name: "opcode notify", req: opcode(dns.OpcodeNotify), rcodes: []int{dns.RcodeNotImplemented}},
		{name: "edns version 1", req: packMsg(t, ednsV1), rcodes: []int{dns.RcodeBadVers}},
		{name: "chaos class, not configured", req: packMsg(t, chaos), rcodes: refused},
		{name: "axfr over udp", req: packQuery(t, "shop.svc.cluster.local.", dns.TypeAXFR),
			rcodes: []int{dns.RcodeRefused, dns.RcodeFormatError}, udpOnly: true},
		{name: "edns buffer 65535", req: packMsg(t, bigBuffer), rcodes: []int{dns.RcodeSuccess},
			check: func(r *dns.Msg, proto string) error {
				opt := r.IsEdns0()
				if opt == nil || opt.UDPSize() > 4096 {
					return fmt.Errorf("OPT %v: want the server's buffer, at most 4096", opt)
				}
				if len(r.Answer) != 2 {
					return fmt.Errorf("%d answers, want the 2 postgres pods", len(r.Answer))
				}
				return nil
			}},
	}
}

func slicesContain(list []int, x int) bool {
	for _, v := range list {
		if v == x {
			return true
		}
	}
	return false
}

func rcodeNames(rcodes []int) string {
	var names []string
	for _, r := range rcodes {
		names = append(names, dns.RcodeToString[r])
	}
	return strings.Join(names, " or ")
}

// exchangeRaw sends req as it is and reads one answer.
func exchangeRaw(addr, proto string, req []byte) (*dns.Msg, error) {
	conn, err := net.DialTimeout(proto, addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 65535)
	var n int
	if proto == "tcp" {
		if _, err := conn.Write(binary.BigEndian.AppendUint16(nil, uint16(len(req)))); err != nil {
			return nil, err
		}
		if _, err := conn.Write(req); err != nil {
			return nil, err
		}
		var l [2]byte
		if _, err := io.ReadFull(conn, l[:]); err != nil {
			return nil, err
		}
		n = int(binary.BigEndian.Uint16(l[:]))
		if _, err := io.ReadFull(conn, buf[:n]); err != nil {
			return nil, err
		}
	} else {
		if _, err := conn.Write(req); err != nil {
			return nil, err
		}
		if n, err = conn.Read(buf); err != nil {
			return nil, err
		}
	}
	if n > 4096 && proto == "udp" {
		return nil, fmt.Errorf("UDP answer of %d bytes", n)
	}
	r := new(dns.Msg)
	if err := r.Unpack(buf[:n]); err != nil {
		// An error reply may echo a question that does not parse: the
		// header still says what happened.
		if n < 12 {
			return nil, fmt.Errorf("answer of %d bytes: %w", n, err)
		}
		r = &dns.Msg{MsgHdr: dns.MsgHdr{Id: binary.BigEndian.Uint16(buf), Response: buf[2]&0x80 != 0,
			Rcode: int(buf[3] & 0x0F)}}
	}
	if !r.Response {
		return nil, errors.New("answer without the QR bit")
	}
	return r, nil
}

// packetGen makes random and mutated packets.
type packetGen struct {
	rnd  *rand.Rand
	good [][]byte
}

func newPacketGen(t *testing.T, seed uint64) *packetGen {
	g := &packetGen{rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"frontend.shop.svc.cluster.local.", dns.TypeA}, {"postgres.data.svc.cluster.local.", dns.TypeSRV},
		{"_grpc._tcp.cart.shop.svc.cluster.local.", dns.TypeSRV}, {"10.10.96.10.in-addr.arpa.", dns.TypePTR},
		{"payments.shop.svc.cluster.local.", dns.TypeANY}, {"example.com.", dns.TypeA},
	} {
		m := question(q.name, q.qtype)
		m.SetEdns0(4096, true)
		g.good = append(g.good, packMsg(t, m))
	}
	return g
}

// next is one packet: random bytes, a good query with bytes flipped,
// cut or spliced, or a good header over random bytes.
func (g *packetGen) next() []byte {
	r := g.rnd
	good := g.good[r.IntN(len(g.good))]
	switch r.IntN(4) {
	case 0:
		b := make([]byte, r.IntN(600))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	case 1:
		b := append([]byte(nil), good...)
		for range 1 + r.IntN(4) {
			b[r.IntN(len(b))] = byte(r.Uint32())
		}
		b[2] &^= 0x80 // a query, so it is parsed rather than dropped
		return b
	case 2:
		return append([]byte(nil), good[:r.IntN(len(good))]...)
	default:
		b := append([]byte(nil), good[:12]...)
		binary.BigEndian.PutUint16(b[4:], uint16(r.IntN(3)))
		binary.BigEndian.PutUint16(b[6:], uint16(r.IntN(3)))
		binary.BigEndian.PutUint16(b[10:], uint16(r.IntN(3)))
		tail := make([]byte, r.IntN(300))
		for i := range tail {
			tail[i] = byte(r.Uint32())
		}
		return append(b, tail...)
	}
}

// floodUDP sends n packets from a few sockets, reading and discarding
// whatever comes back, in bursts small enough for the socket buffers.
func floodUDP(t *testing.T, addr string, gen *packetGen, n int) {
	const sockets = 4
	var wg sync.WaitGroup
	var conns []net.Conn
	for range sockets {
		c, err := net.Dial("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		wg.Go(func() {
			buf := make([]byte, 65535)
			for {
				if _, err := c.Read(buf); err != nil && !isRefused(err) {
					return
				}
			}
		})
	}
	for i := range n {
		c := conns[i%sockets]
		if _, err := c.Write(gen.next()); err != nil && !isRefused(err) {
			t.Fatal(err)
		}
		if i%200 == 199 {
			// Pace the burst with a round trip, so the flood measures the
			// server rather than the kernel's buffers.
			if _, err := testutil.Exchange(addr, "udp", "frontend.shop.svc.cluster.local.", dns.TypeA); err != nil {
				t.Logf("pacing query during the flood: %v", err)
			}
		}
	}
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
}

func isRefused(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && strings.Contains(op.Err.Error(), "refused")
}

// floodTCP opens conns connections and sends each perConn random frames,
// some with a length that lies; the server may close a connection at any
// point, which ends it.
func floodTCP(t *testing.T, addr string, gen *packetGen, conns, perConn int) {
	var wg sync.WaitGroup
	for range conns {
		frames := make([][]byte, perConn)
		for i := range frames {
			p := gen.next()
			l := len(p)
			if gen.rnd.IntN(10) == 0 {
				l = gen.rnd.IntN(65536)
			}
			frames[i] = append(binary.BigEndian.AppendUint16(nil, uint16(l)), p...)
		}
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer c.Close()
			go io.Copy(io.Discard, c)
			c.SetDeadline(time.Now().Add(10 * time.Second))
			for _, f := range frames {
				if _, err := c.Write(f); err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
}
