package listeners

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// fakeConn is a connection that records being closed.
type fakeConn struct {
	net.Conn
	from   *net.TCPAddr
	closed bool
}

func (c *fakeConn) RemoteAddr() net.Addr { return c.from }
func (c *fakeConn) Close() error         { c.closed = true; return nil }

// Which connection a new one closes: "a1" is a connection from 10.0.0.a
// that last read at time 1.
func TestConnSetEvictsTheIdlest(t *testing.T) {
	cases := []struct {
		name            string
		open            []string
		limit, perSrc   int
		from            string
		closed          string // "" for none
		source, bounded bool   // which counter counted
	}{
		{"under the bounds", []string{"a1", "b2"}, 4, 2, "c", "", false, false},
		{"listener full: the idlest of all", []string{"a3", "b1", "c2"}, 3, 0, "d", "b1", false, true},
		{"source at its bound: its own idlest", []string{"a3", "a2", "b1"}, 8, 2, "a", "a2", true, false},
		{"source bound before the listener's", []string{"a3", "a2", "b1"}, 3, 2, "a", "a2", true, false},
		{"another source on a full listener", []string{"a3", "a2", "b1"}, 3, 2, "c", "b1", false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			set := newConnSet()
			conns := map[string]*fakeConn{}
			source := prometheus.NewCounter(prometheus.CounterOpts{Name: "source"})
			full := prometheus.NewCounter(prometheus.CounterOpts{Name: "full"})
			b := connBounds{limit: c.limit, perSource: c.perSrc, evicted: full, evictedSource: source}
			for _, o := range c.open {
				fc := fakeFrom(o[:1])
				s := set.add(fc, connBounds{limit: 100})
				s.last.Store(int64(o[1] - '0'))
				conns[o] = fc
			}
			if set.add(fakeFrom(c.from), b) == nil {
				t.Fatal("refused")
			}
			var closed []string
			for name, fc := range conns {
				if fc.closed {
					closed = append(closed, name)
				}
			}
			if strings.Join(closed, ",") != c.closed {
				t.Fatalf("closed %v, want %q", closed, c.closed)
			}
			if s, f := counterValue(t, source), counterValue(t, full); (s == 1) != c.source || (f == 1) != c.bounded {
				t.Fatalf("counted source %v, full %v", s, f)
			}
			want := len(c.open) + 1
			if c.closed != "" {
				want--
			}
			if set.len() != want {
				t.Fatalf("%d open, want %d", set.len(), want)
			}
		})
	}
}

func fakeFrom(letter string) *fakeConn {
	return &fakeConn{from: net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, letter[0]}), 1000))}
}

// A closed set refuses new connections and closes the ones it held.
func TestConnSetClosed(t *testing.T) {
	set := newConnSet()
	held := fakeFrom("a")
	set.add(held, connBounds{limit: 4})
	set.closeAll()
	if !held.closed {
		t.Fatal("closeAll left a connection open")
	}
	if set.add(fakeFrom("b"), connBounds{limit: 4}) != nil {
		t.Fatal("a closed set took a connection")
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
