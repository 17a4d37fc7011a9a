package listeners

import (
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/query"
	"github.com/shardns/shardns/zone"
)

// The cost of server blocks on the fast path: the same questions answered
// by a listener of one block (no scope) and by one of four blocks, each
// with its own handler, as NodeLocal DNSCache's Corefile splits
// cluster.local, in-addr.arpa, ip6.arpa and the root. Both go through
// Config.serve, as a packet read from a socket does, without the socket.

// blockNames are the questions: a name of the cluster zone and a name of
// the root block's zone file, each as asked and in mixed case (a client
// with 0x20 randomisation, or a resolver echoing one).
var blockNames = []struct{ label, name string }{
	{"cluster.local", "web.ns.svc.cluster.local."},
	{"root", "www.example.org."},
	{"cluster.local-MixedCase", "Web.NS.svc.Cluster.Local."},
	{"root-MixedCase", "WWW.Example.ORG."},
}

// exampleZone is the root block's zone file.
const exampleZone = `example.org. 3600 IN SOA ns.example.org. host.example.org. 1 7200 3600 1209600 3600
example.org. 3600 IN NS ns.example.org.
ns.example.org. 3600 IN A 192.0.2.53
www.example.org. 300 IN A 192.0.2.1
`

// fileObjects is exampleZone as the objects of a static reader.
func fileObjects(t testing.TB) []any {
	t.Helper()
	zp := dns.NewZoneParser(strings.NewReader(exampleZone), "example.org.", "example.org.db")
	var rrs []dns.RR
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		rrs = append(rrs, rr)
	}
	f, err := zone.NewFileZone("example.org.", "example.org.db", rrs, nil)
	if err != nil || zp.Err() != nil {
		t.Fatal(err, zp.Err())
	}
	return []any{f}
}

// clusterObjects are the test zone's objects: web.ns.svc.cluster.local.
func clusterObjects() []any {
	return []any{
		&model.Namespace{Name: "ns"},
		&model.Service{Namespace: "ns", Name: "web", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")},
			Ports: []model.Port{{Name: "http", Protocol: "TCP", Port: 80}}},
	}
}

// blockHandler answers the cluster domains given (none: no cluster zone)
// from objs.
func blockHandler(cluster []string, reverse []string, objs []any) *query.Handler {
	zcfg := &zone.Config{Domains: zone.Domains{Cluster: cluster, Reverse: reverse}, TTL: 5}
	zcfg.Prepare()
	return &query.Handler{Config: zcfg, Zones: zone.NewStatic(zcfg, objs, true)}
}

// oneBlock is a listener whose only block answers every name: the
// cluster zone and the zone file through one handler.
func oneBlock(t testing.TB) *Config {
	h := blockHandler([]string{"cluster.local."}, nil, append(clusterObjects(), fileObjects(t)...))
	return blocksConfig(h, nil)
}

// fourBlocks is a listener of NodeLocal DNSCache's four blocks, each with
// a handler of its own; the root block holds the zone file.
func fourBlocks(t testing.TB) *Config {
	cluster := blockHandler([]string{"cluster.local."}, nil, clusterObjects())
	v4 := blockHandler(nil, []string{"in-addr.arpa."}, nil)
	v6 := blockHandler(nil, []string{"ip6.arpa."}, nil)
	root := blockHandler(nil, nil, fileObjects(t))
	return blocksConfig(root, NewScope([]Block{
		{Zones: []string{"cluster.local"}, Handler: cluster},
		{Zones: []string{"in-addr.arpa"}, Handler: v4},
		{Zones: []string{"ip6.arpa"}, Handler: v6},
		{Zones: []string{"."}, Handler: root},
	}, ""))
}

// blocksConfig is a listener configuration answering through h, limited
// by scope unless it is nil.
func blocksConfig(h *query.Handler, scope *Scope) *Config {
	cfg := &Config{Handler: new(atomic.Pointer[query.Handler]), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	cfg.Handler.Store(h)
	if scope != nil {
		cfg.Scope = new(atomic.Pointer[Scope])
		cfg.Scope.Store(scope)
	}
	return cfg
}

// ednsQuery is name's A question with EDNS0, as a stub resolver asks.
func ednsQuery(t testing.TB, name string) []byte {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.SetEdns0(1232, false)
	req, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// Both listeners give every question the same answer, from the block
// holding its name, and a routed question on the fast path allocates
// nothing, whatever its letter case.
func TestBlocksFastPathAllocatesNothing(t *testing.T) {
	configs := map[string]*Config{"one block": oneBlock(t), "four blocks": fourBlocks(t)}
	for label, cfg := range configs {
		for _, q := range blockNames {
			req := ednsQuery(t, q.name)
			out := make([]byte, 0, 512)
			r := new(dns.Msg)
			if err := r.Unpack(cfg.serve(req, query.Transport{}, out)); err != nil {
				t.Fatalf("%s, %s: %v", label, q.name, err)
			}
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Question[0].Name != q.name {
				t.Fatalf("%s, %s: got %v, want one answer to the question as asked", label, q.name, r)
			}
			n := testing.AllocsPerRun(100, func() { cfg.serve(req, query.Transport{}, out) })
			if n != 0 && !testutil.RaceEnabled { // the race detector empties sync.Pools
				t.Errorf("%s, %s: %v allocations per query, want 0", label, q.name, n)
			}
		}
	}
}

// BenchmarkServeBlocks is a fast-path answer through one block and
// through four, for a name of the cluster block and one of the root
// block: what a chain per server block costs a query.
func BenchmarkServeBlocks(b *testing.B) {
	for _, c := range []struct {
		label string
		cfg   *Config
	}{{"one-block", oneBlock(b)}, {"four-blocks", fourBlocks(b)}} {
		for _, q := range blockNames {
			b.Run(c.label+"/"+q.label, func(b *testing.B) {
				req := ednsQuery(b, q.name)
				out := make([]byte, 0, 512)
				b.ReportAllocs()
				for b.Loop() {
					out = c.cfg.serve(req, query.Transport{}, out[:0])
				}
			})
		}
	}
}
