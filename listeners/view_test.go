package listeners

import (
	"fmt"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/expression"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/query"
	"github.com/shardns/shardns/zone"
)

// A view's expression sees the listener's own address and port, and the
// client's, over UDP and TCP: here a view holding for exactly them
// answers from an empty zone.
func TestViewsSeeBothEnds(t *testing.T) {
	for _, tc := range []struct {
		expr   string // %d is the listener's port
		rcode  int
		answer int
	}{
		{"server_ip() == '127.0.0.1' && server_port() == '%d' && client_ip() == '127.0.0.1' && port() != '0'",
			dns.RcodeNameError, 0},
		{"server_port() == '1%d'", dns.RcodeSuccess, 1},
	} {
		s, err := Bind("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cond, err := expression.Compile(fmt.Sprintf(tc.expr, netip.MustParseAddrPort(s.Addr()).Port()))
		if err != nil {
			t.Fatal(err)
		}
		h := testHandler()
		empty := &query.Handler{Config: h.Config, Zones: zone.NewStatic(h.Config, nil, true)}
		h.Views = []query.View{{Name: "v", Conditions: []*expression.Condition{cond}, Handler: empty}}
		var handler atomic.Pointer[query.Handler]
		handler.Store(h)
		addr := spawnListener(t, Config{MaxConnections: 4, IdleTimeout: time.Second, Handler: &handler}, s, NewProps)
		for _, proto := range []string{"udp", "tcp"} {
			r, err := testutil.Exchange(addr, proto, "web.ns.svc.cluster.local.", dns.TypeA)
			if err != nil {
				t.Fatal(err)
			}
			if r.Rcode != tc.rcode || len(r.Answer) != tc.answer {
				t.Errorf("%s over %s: %s %v, want %s", tc.expr, proto, dns.RcodeToString[r.Rcode], r.Answer, dns.RcodeToString[tc.rcode])
			}
		}
	}
}
