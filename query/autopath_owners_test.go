package query

import (
	"context"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/cache"
	"github.com/shardns/shardns/zone"
)

// A node-local process holds no zone: autopath walks the client's search
// path asking the owners, and answers late, as CoreDNS's autopath answers
// from its own zones. The owner here answers from the same records the
// handler's static reader holds.
func TestAutopathAsksOwners(t *testing.T) {
	var asked atomic.Int32
	var mute atomic.Bool
	var h *Handler
	var static *zone.Static
	owner := func(ctx context.Context, _, _, name string, qtype uint16, _ zone.Topology) (*dns.Msg, int, error) {
		asked.Add(1)
		if mute.Load() {
			<-ctx.Done()
			return nil, 0, ctx.Err()
		}
		resp := zone.Answer(h.Config, static, zone.Question{Name: name, Type: qtype})
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		m.Rcode, m.Answer, m.Ns, m.Authoritative = resp.Rcode, resp.Answer, resp.Ns, true
		return m, 0, nil
	}
	h, v := movingHandler(t, &replicas{}, "b")
	static = v.Static
	h.Cluster.Ask = owner
	h.Cluster.Cache = cache.New(cache.Config{Size: 100, SuccessMaxTTL: time.Minute, DenialMaxTTL: time.Minute})
	clients := &zone.ClientIndex{}
	clients.Set(zone.NewClients([]zone.NodePod{
		{Namespace: "ns", Name: "v4", IPs: []netip.Addr{netip.MustParseAddr("10.9.0.7")}},
		{Namespace: "ns", Name: "dual", IPs: []netip.Addr{netip.MustParseAddr("10.9.0.8"), netip.MustParseAddr("fd00::8")}},
	}))
	h.Autopath, h.IPv4Clients = clients, clients
	v4 := netip.MustParseAddrPort("10.9.0.7:5000")
	dual := netip.MustParseAddrPort("10.9.0.8:5000")
	stranger := netip.MustParseAddrPort("10.9.0.9:5000")

	cases := []struct {
		name   string
		qname  string
		qtype  uint16
		client netip.AddrPort
		mute   bool
		rcode  int
		answer []string
	}{
		{"second search domain", "web.ns.ns.svc.cluster.local.", dns.TypeA, v4, false, dns.RcodeSuccess, []string{
			"web.ns.ns.svc.cluster.local.\t5\tIN\tCNAME\tweb.ns.svc.cluster.local.",
			"web.ns.svc.cluster.local.\t5\tIN\tA\t10.0.0.1"}},
		{"as asked", "web.ns.svc.cluster.local.", dns.TypeA, dual, false, dns.RcodeSuccess, []string{
			"web.ns.svc.cluster.local.\t5\tIN\tA\t10.0.0.1"}},
		{"unknown client: the NXDOMAIN chain", "web.ns.ns.svc.cluster.local.", dns.TypeA, stranger, false, dns.RcodeNameError, nil},
		{"nothing anywhere, no upstream", "nothing.ns.svc.cluster.local.", dns.TypeA, dual, false, dns.RcodeRefused, nil},
		{"dual-stack client asks AAAA", "web.ns.ns.svc.cluster.local.", dns.TypeAAAA, dual, false, dns.RcodeSuccess, nil},
		{"owner silent: SERVFAIL, no guess", "other.ns.ns.svc.cluster.local.", dns.TypeA, v4, true, dns.RcodeServerFailure, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mute.Store(c.mute)
			r := serveLate(t, h, c.qname, c.qtype, c.client)
			if r.Rcode != c.rcode || !slices.Equal(rrStrings(r.Answer), c.answer) {
				t.Fatalf("%s %v, want %s %v", dns.RcodeToString[r.Rcode], r.Answer, dns.RcodeToString[c.rcode], c.answer)
			}
		})
	}
	mute.Store(false)

	t.Run("the search path's answers are cached", func(t *testing.T) {
		serveLate(t, h, "web.ns.ns.svc.cluster.local.", dns.TypeA, v4)
		before := asked.Load()
		r := serveLate(t, h, "web.ns.ns.svc.cluster.local.", dns.TypeA, v4)
		if len(r.Answer) != 2 || asked.Load() != before {
			t.Fatalf("%v, %d owners asked, want the cached answer", r.Answer, asked.Load()-before)
		}
	})
	t.Run("an IPv4-only client's AAAA: NODATA, no one asked", func(t *testing.T) {
		before := asked.Load()
		out := h.Serve(pack(t, query("web.ns.ns.svc.cluster.local.", dns.TypeAAAA)), Transport{Client: v4}, nil)
		r := new(dns.Msg)
		if err := r.Unpack(out); err != nil {
			t.Fatal(err)
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 || asked.Load() != before {
			t.Fatalf("%s %v, %d owners asked; want NODATA at once", dns.RcodeToString[r.Rcode], r.Answer, asked.Load()-before)
		}
	})
}

// serveLate asks h for qname from client and returns the answer, given at
// once or late.
func serveLate(t *testing.T, h *Handler, qname string, qtype uint16, client netip.AddrPort) *dns.Msg {
	t.Helper()
	late := make(lateAnswers, 1)
	out := h.Serve(pack(t, query(qname, qtype)), Transport{Client: client, Late: late}, nil)
	if out == nil {
		select {
		case out = <-late:
		case <-time.After(5 * time.Second):
			t.Fatal("no answer")
		}
	}
	m := new(dns.Msg)
	if err := m.Unpack(out); err != nil {
		t.Fatal(err)
	}
	return m
}

func rrStrings(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, rr.String())
	}
	return out
}
