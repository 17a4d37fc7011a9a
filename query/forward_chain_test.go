package query

import (
	"io"
	"log/slog"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/cache"
	"github.com/shardns/shardns/forward"
)

func TestUpstreamChain(t *testing.T) {
	eng := &Upstream{Deadline: 1, Except: []string{"ci.eng.corp.example."}}
	corp := &Upstream{Deadline: 2}
	def := &Upstream{Forwarder: &forward.Forwarder{}, Except: []string{"internal.example."},
		Stubs: []Stub{{Zone: "corp.example.", Upstream: corp}, {Zone: "eng.corp.example.", Upstream: eng},
			{Zone: "lab.corp.example.", Upstream: corp}}}
	def.Stubs = append(def.Stubs, Stub{Zone: "internal.example.", Upstream: eng})
	noDefault := &Upstream{Stubs: def.Stubs}
	for _, c := range []struct {
		u        *Upstream
		name     string
		want     []*Upstream
		excepted bool
	}{
		{def, "a.eng.corp.example.", []*Upstream{eng, corp, def}, false}, // longest zone first, the default last
		{def, "a.lab.corp.example.", []*Upstream{corp, def}, false},      // a stub of two zones comes once
		{def, "x.ci.eng.corp.example.", []*Upstream{corp, def}, true},    // eng excepts it: the next one is asked
		{def, "www.example.", []*Upstream{def}, false},                   // only the default
		{def, "db.internal.example.", []*Upstream{eng}, true},            // the default excepts it, a stub holds it
		{noDefault, "x.ci.eng.corp.example.", []*Upstream{corp}, true},   // no default
		{&Upstream{Forwarder: def.Forwarder, Except: []string{"example."}}, "www.example.", nil, true},
		{nil, "www.example.", nil, false},
	} {
		got, excepted := c.u.chain(c.name)
		if !slices.Equal(got, c.want) || excepted != c.excepted {
			t.Errorf("%s: chain %v (excepted %v), want %v (%v)", c.name, got, excepted, c.want, c.excepted)
		}
	}
}

// rcodeUpstream answers every question with rcode over UDP, and an A
// record when rcode is NOERROR; asked counts the questions.
func rcodeUpstream(t *testing.T, rcode int, asked *atomic.Int32) *forward.Forwarder {
	t.Helper()
	return udpForwarder(t, func(w dns.ResponseWriter, r *dns.Msg) {
		asked.Add(1)
		m := new(dns.Msg)
		m.SetRcode(r, rcode)
		if rcode == dns.RcodeSuccess {
			rr, _ := dns.NewRR(r.Question[0].Name + " 60 IN A 192.0.2.7")
			m.Answer = []dns.RR{rr}
		}
		_ = w.WriteMsg(m)
	})
}

// udpForwarder serves handler over UDP on loopback and returns a
// forwarder to it alone, which keeps asking it whatever it answers.
func udpForwarder(t *testing.T, handler dns.HandlerFunc) *forward.Forwarder {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: handler}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	f := forward.New(forward.Config{Upstreams: []string{pc.LocalAddr().String()}, Policy: "sequential",
		Timeout: 2 * time.Second, MaxConcurrent: 10, HealthCheck: time.Hour, MaxFails: 100,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(f.Close)
	return f
}

// forwardedAnswer serves name and returns the answer sent late.
func forwardedAnswer(t *testing.T, h *Handler, name string) *dns.Msg {
	t.Helper()
	late := make(lateAnswers, 1)
	tr := ipv6Client
	tr.Late = late
	if out := h.Serve(pack(t, query(name, dns.TypeA)), tr, nil); out != nil {
		var r dns.Msg
		if err := r.Unpack(out); err != nil {
			t.Fatal(err)
		}
		return &r
	}
	select {
	case b := <-late:
		var r dns.Msg
		if err := r.Unpack(b); err != nil {
			t.Fatal(err)
		}
		return &r
	case <-time.After(5 * time.Second):
		t.Fatal("no late answer")
	}
	return nil
}

// A stub whose upstream answers one of its Next rcodes passes the
// question on to the default forwarder; its answer is cached by the
// default only, so the next question asks the stub again, as CoreDNS's
// forward does, and the default's cache answers it.
func TestStubNextFallsToDefault(t *testing.T) {
	var stubAsked, defAsked atomic.Int32
	newCache := func() *cache.Cache {
		return cache.New(cache.Config{Size: 100, SuccessMaxTTL: time.Minute, DenialMaxTTL: time.Minute})
	}
	stub := &Upstream{Forwarder: rcodeUpstream(t, dns.RcodeNameError, &stubAsked), Cache: newCache(),
		Deadline: 3 * time.Second, Now: time.Now, Next: []int{dns.RcodeNameError}}
	h := testHandler(t)
	h.Upstream = &Upstream{Forwarder: rcodeUpstream(t, dns.RcodeSuccess, &defAsked), Cache: newCache(),
		Deadline: 3 * time.Second, Now: time.Now, Stubs: []Stub{{Zone: "lab.example.", Upstream: stub}}}
	for i := range 2 {
		r := forwardedAnswer(t, h, "db.lab.example.")
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.7" {
			t.Fatalf("question %d: %v, want the default forwarder's A", i, r)
		}
	}
	if stubAsked.Load() != 2 || defAsked.Load() != 1 {
		t.Fatalf("stub asked %d, default %d times: want 2 and 1 (the default's answer cached, the stub's NXDOMAIN not)", stubAsked.Load(), defAsked.Load())
	}
	// Without Next the stub's NXDOMAIN is the answer.
	stub.Next = nil
	if r := forwardedAnswer(t, h, "other.lab.example."); r.Rcode != dns.RcodeNameError {
		t.Fatalf("without next: rcode %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
	}
}

// A name the only forwarder excepts gets SERVFAIL, as from CoreDNS's
// forward with no plugin after it; a name it does not except is asked.
func TestExceptedNameWithNothingAfter(t *testing.T) {
	var asked atomic.Int32
	h := testHandler(t)
	h.Upstream = &Upstream{Forwarder: rcodeUpstream(t, dns.RcodeSuccess, &asked), Deadline: 3 * time.Second,
		Now: time.Now, Except: []string{"corp.example."}}
	if r := forwardedAnswer(t, h, "db.corp.example."); r.Rcode != dns.RcodeServerFailure || asked.Load() != 0 {
		t.Fatalf("excepted name: rcode %s after %d questions upstream, want SERVFAIL and none", dns.RcodeToString[r.Rcode], asked.Load())
	}
	if r := forwardedAnswer(t, h, "www.example."); r.Rcode != dns.RcodeSuccess || asked.Load() != 1 {
		t.Fatalf("other name: rcode %s after %d questions, want NOERROR from upstream", dns.RcodeToString[r.Rcode], asked.Load())
	}
}
