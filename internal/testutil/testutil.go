// Package testutil holds helpers shared by the tests: deadline-bounded
// waiting and DNS exchanges over real sockets.
package testutil

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// Eventually retries check until it returns nil or timeout passes, then
// fails the test with the last error. It is how tests wait for a state.
func Eventually(t testing.TB, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	delay := 5 * time.Millisecond
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v: %v", timeout, err)
		}
		time.Sleep(delay)
		delay = min(delay*2, 200*time.Millisecond)
	}
}

// Exchange sends one question to addr over net ("udp" or "tcp").
func Exchange(addr, net, name string, qtype uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return ExchangeMsg(addr, net, m)
}

// ExchangeMsg sends m to addr over net ("udp" or "tcp").
func ExchangeMsg(addr, net string, m *dns.Msg) (*dns.Msg, error) {
	c := &dns.Client{Net: net, Timeout: 2 * time.Second, UDPSize: 65535}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		return nil, fmt.Errorf("%s %s %s: %w", net, m.Question[0].Name, dns.TypeToString[m.Question[0].Qtype], err)
	}
	return r, nil
}

// Records renders the records of a section as sorted zone-file lines
// with the TTL kept, for comparison with expectations.
func Records(rrs []dns.RR) []string {
	out := make([]string, len(rrs))
	for i, rr := range rrs {
		out[i] = rr.String()
	}
	sort.Strings(out)
	return out
}
