package query

import (
	"context"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/cache"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// elsewhereView holds no zone: every one is asked of replica "b", as on a
// node-local process.
type elsewhereView struct{ *zone.Static }

func (elsewhereView) Zone(string) *zone.Snapshot { return nil }
func (elsewhereView) Remote(string) []string     { return []string{"b"} }

// podNamespaces is a node's pods by address.
type podNamespaces map[netip.Addr]string

func (p podNamespaces) Namespace(a netip.Addr) (string, bool) { ns, ok := p[a]; return ns, ok }

// A client pod whose namespace has a mesh host of its own is answered
// with the owner's answer for that namespace, never from the answers
// cached by name, and its answer is not cached for anyone else.
func TestMeshClientsNamespaceAnswers(t *testing.T) {
	cfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}}, TTL: 5, MeshTTL: 30, MeshZones: []string{"global."}}
	cfg.Prepare()
	addr := func(s string) []netip.Addr { return []netip.Addr{netip.MustParseAddr(s)} }
	static := zone.NewStatic(cfg, []any{
		&model.ServiceEntry{Namespace: "default", Name: "mesh", Hosts: []string{"*.test.global"}, Addresses: addr("127.255.0.2")},
		&model.ServiceEntry{Namespace: "tenant-a", Name: "db", Hosts: []string{"db.test.global"}, Addresses: addr("6.6.6.8"),
			ExportTo: []string{"."}},
	}, true)
	var mu sync.Mutex
	asked := map[string]int{} // by namespace, "" for Ask
	reply := func(name, a string) *dns.Msg {
		m := new(dns.Msg)
		m.SetQuestion(name, dns.TypeA)
		m.Response, m.Authoritative = true, true
		rr, _ := dns.NewRR(name + " 30 IN A " + a)
		m.Answer = []dns.RR{rr}
		return m
	}
	h := &Handler{Config: cfg, Zones: elsewhereView{static},
		MeshClients: podNamespaces{netip.MustParseAddr("10.0.0.1"): "tenant-a", netip.MustParseAddr("10.0.0.2"): "tenant-b"},
		Cluster: &Cluster{Cache: cache.New(cache.Config{Size: 100, SuccessMaxTTL: time.Minute}),
			Timeout: time.Second, Attempts: 1, MaxInFlight: 10, Now: time.Now,
			Ask: func(_ context.Context, _, _, name string, _ uint16, _ zone.Topology) (*dns.Msg, int, error) {
				mu.Lock()
				asked[""]++
				mu.Unlock()
				return reply(name, "127.255.0.2"), 0, nil
			},
			AskFor: func(_ context.Context, _, _, name string, _ uint16, _ zone.Topology, ns string) (*dns.Msg, int, error) {
				mu.Lock()
				asked[ns]++
				mu.Unlock()
				return reply(name, map[string]string{"tenant-a": "6.6.6.8"}[ns]), 0, nil
			}}}
	for round := range 2 {
		for _, c := range []struct{ from, want string }{
			{"10.0.0.2", "127.255.0.2"}, {"10.0.0.1", "6.6.6.8"}, {"10.0.0.3", "127.255.0.2"},
		} {
			if got := serveA(t, h, c.from, "db.test.global."); got != c.want {
				t.Errorf("round %d, from %s: %s, want %s", round, c.from, got, c.want)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if asked["tenant-a"] != 2 || asked[""] != 1 || len(asked) != 2 {
		t.Errorf("owners asked %v; want tenant-a's question each time and the public one once (cached)", asked)
	}
}

// serveA asks h for name's A record from address from and returns the
// address answered, waiting for a late answer.
func serveA(t *testing.T, h *Handler, from, name string) string {
	t.Helper()
	late := make(lateAnswers, 1)
	tr := Transport{Late: late, Client: netip.AddrPortFrom(netip.MustParseAddr(from), 5353)}
	b := h.Serve(pack(t, query(name, dns.TypeA)), tr, nil)
	if b == nil {
		select {
		case b = <-late:
		case <-time.After(5 * time.Second):
			t.Fatal("no answer")
		}
	}
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil || len(m.Answer) != 1 {
		t.Fatalf("answer %v, %v", m, err)
	}
	return m.Answer[0].(*dns.A).A.String()
}
