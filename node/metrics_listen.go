package node

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"

	"github.com/shardns/shardns/httpapi"
)

// metricsListeners serve /metrics alone on http.metricsListen, where a
// Corefile's `prometheus ADDR` had CoreDNS serve it. nil serves nothing.
type metricsListeners struct {
	entries []*metricsEntry // in the order configured
}

// metricsEntry is one address: its listener, and its server once started.
type metricsEntry struct {
	addr string // as configured
	l    net.Listener
	srv  *httpapi.Server
}

// bindMetrics binds the addresses of addrs that old does not hold, and
// takes over those it does (still serving), so that a reload keeps an
// unchanged address without a moment unbound. On error it closes what it
// bound and leaves old as it was.
func bindMetrics(old *metricsListeners, addrs []string) (*metricsListeners, error) {
	if len(addrs) == 0 {
		return nil, nil
	}
	m := &metricsListeners{}
	for i, a := range addrs {
		if e := old.entry(a); e != nil {
			m.entries = append(m.entries, e)
			continue
		}
		l, err := net.Listen("tcp", a)
		if err != nil {
			m.closeExcept(old)
			return nil, fmt.Errorf("http.metricsListen[%d]: %w", i, err)
		}
		m.entries = append(m.entries, &metricsEntry{addr: a, l: l})
	}
	return m, nil
}

func (m *metricsListeners) entry(addr string) *metricsEntry {
	if m == nil {
		return nil
	}
	for _, e := range m.entries {
		if e.addr == addr {
			return e
		}
	}
	return nil
}

// start serves n's registry on every listener not serving yet, on
// goroutines n waits for.
func (m *metricsListeners) start(n *Node) {
	if m == nil {
		return
	}
	for _, e := range m.entries {
		if e.srv != nil {
			continue
		}
		srv, l := httpapi.NewMetrics(httpapi.Config{Registry: n.reg, Counters: n.httpCounters}), e.l
		e.srv = srv
		n.wg.Go(func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				n.log.Error("metrics server", "addr", l.Addr().String(), "err", err)
			}
		})
	}
}

// closeExcept stops the servers and closes the listeners of m that keep
// does not hold.
func (m *metricsListeners) closeExcept(keep *metricsListeners) {
	if m == nil {
		return
	}
	for _, e := range m.entries {
		if keep.entry(e.addr) == e {
			continue
		}
		if e.srv != nil {
			e.srv.Close() // closes its listener too
		} else {
			e.l.Close()
		}
	}
}

// close stops every server and closes every listener.
func (m *metricsListeners) close() { m.closeExcept(nil) }

// configured are the addresses m was bound for.
func (m *metricsListeners) configured() []string {
	if m == nil {
		return nil
	}
	out := make([]string, len(m.entries))
	for i, e := range m.entries {
		out[i] = e.addr
	}
	return out
}

// same reports whether m serves exactly addrs.
func (m *metricsListeners) same(addrs []string) bool {
	return slices.Equal(m.configured(), addrs)
}

// Addrs are the addresses bound, in the order configured.
func (m *metricsListeners) Addrs() []string {
	if m == nil {
		return nil
	}
	out := make([]string, len(m.entries))
	for i, e := range m.entries {
		out[i] = e.l.Addr().String()
	}
	return out
}

// MetricsAddrs are the addresses serving /metrics alone
// (http.metricsListen), bound.
func (n *Node) MetricsAddrs() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.metricsOnly.Addrs()
}
