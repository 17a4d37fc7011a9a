package query

import (
	"testing"

	"github.com/miekg/dns"
)

func federationHandler(t *testing.T, locality *Locality) *Handler {
	h := testHandler(t)
	h.Federation = &Federation{Zones: []string{"cluster.local."}, Domains: map[string]string{"prod": "prod.example.com."}}
	if locality != nil {
		h.Federation.SetLocality(*locality)
	}
	return h
}

func TestFederation(t *testing.T) {
	h := federationHandler(t, &Locality{Zone: "eu-west-1a", Region: "eu-west-1"})
	cname := func(from, to string) string { return from + "\t0\tIN\tCNAME\t" + to }
	for _, tc := range []struct {
		name  string
		qtype uint16
		rcode int
		want  []string
	}{
		// A name that exists here is answered here, under the name asked.
		{"web.ns.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"web.ns.prod.svc.cluster.local.\t5\tIN\tA\t10.0.0.1"}},
		{"Web.NS.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"Web.NS.prod.svc.cluster.local.\t5\tIN\tA\t10.0.0.1"}},
		{"_http._tcp.web.ns.prod.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess,
			[]string{"_http._tcp.web.ns.prod.svc.cluster.local.\t5\tIN\tSRV\t0 100 80 web.ns.svc.cluster.local."}},
		// A name that does not exist here points to the federation's
		// record for this node's failure domain.
		{"gone.ns.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess,
			[]string{cname("gone.ns.prod.svc.cluster.local.", "gone.ns.prod.svc.eu-west-1a.eu-west-1.prod.example.com.")}},
		{"gone.elsewhere.prod.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess,
			[]string{cname("gone.elsewhere.prod.svc.cluster.local.", "gone.elsewhere.prod.svc.eu-west-1a.eu-west-1.prod.example.com.")}},
		{"ep.gone.ns.prod.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess,
			[]string{cname("ep.gone.ns.prod.svc.cluster.local.", "ep.gone.ns.prod.svc.eu-west-1a.eu-west-1.prod.example.com.")}},
		// Not a federation's name: the label is a namespace like any other.
		{"web.ns.staging.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"web.ns.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"web.ns.svc.cluster.local.\t5\tIN\tA\t10.0.0.1"}},
	} {
		t.Run(tc.name+"/"+dns.TypeToString[tc.qtype], func(t *testing.T) {
			r := serve(t, h, pack(t, query(tc.name, tc.qtype)), Transport{})
			if r.Rcode != tc.rcode || !r.Authoritative {
				t.Fatalf("rcode %s aa %v, want %s aa: %v", dns.RcodeToString[r.Rcode], r.Authoritative, dns.RcodeToString[tc.rcode], r)
			}
			if r.Question[0].Name != tc.name {
				t.Errorf("question %q, want the one asked", r.Question[0].Name)
			}
			var got []string
			for _, rr := range r.Answer {
				got = append(got, rr.String())
			}
			if len(got) != len(tc.want) {
				t.Fatalf("answer %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("answer %q, want %q", got, tc.want)
				}
			}
			if tc.rcode == dns.RcodeSuccess && len(r.Ns) != 0 {
				t.Errorf("authority %v, want none", r.Ns)
			}
		})
	}
}

// Until the node's zone and region are known, a name that needs the
// federation's CNAME fails; names that exist here are still answered.
func TestFederationWithoutLocality(t *testing.T) {
	h := federationHandler(t, nil)
	if r := serve(t, h, pack(t, query("gone.ns.prod.svc.cluster.local.", dns.TypeA)), Transport{}); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("rcode %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	if r := serve(t, h, pack(t, query("web.ns.prod.svc.cluster.local.", dns.TypeA)), Transport{}); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Errorf("got %v, want the service's address", r)
	}
}

func TestFederationClaimsWhatItMatches(t *testing.T) {
	f := &Federation{Zones: []string{"cluster.local."}, Domains: map[string]string{"prod": "prod.example.com."}}
	for _, name := range []string{"web.ns.prod.svc.cluster.local.", "ns.prod.svc.cluster.local.", "prod.svc.cluster.local.",
		"cluster.local.", "web.ns.svc.cluster.local.", "prod.cluster.local.", "web.ns.prod.svc.example.org.", "."} {
		_, matched := f.match(name)
		if f.claims(name) != matched {
			t.Errorf("%s: claims %v, match %v", name, f.claims(name), matched)
		}
	}
	if n := testing.AllocsPerRun(100, func() { f.claims("web.ns.prod.svc.cluster.local.") }); n != 0 {
		t.Errorf("claims allocates %v times", n)
	}
}
