package zonefile

import (
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/zone"
)

// FuzzParse feeds arbitrary zone file text to the loader and, when it
// loads, asks the zone for every name it holds (and below and beside
// them, for the first records) with every type it holds: nothing may panic, and every answer is
// a well-formed response.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good), "")
	f.Add([]byte(good), "example.org")
	f.Add([]byte(`$ORIGIN example.org.
$TTL 60
@ SOA ns hm 1 1 1 1 1
  NS ns
  MX 10 mail
ns A 192.0.2.1
www CNAME web
web CNAME www
a CNAME *.w
*.w A 192.0.2.9
*.c CNAME c
sub NS ns.sub
sub NS ns
sub DS 1 13 2 00
ns.sub A 192.0.2.2
_s._tcp SRV 1 1 1 ns
has\046dot TXT x
`), "")
	f.Add([]byte("@ 60 SOA ns hm 1 1 1 1 1\n$GENERATE 1-3 h$ A 192.0.2.$\n"), "example.org")
	f.Add([]byte("$INCLUDE /etc/passwd\n"), "example.org")
	f.Add([]byte("@ SOA ns hm ( 1 1\n 1 1 1 )\n"), "x")
	cfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}}, TTL: 5}
	cfg.Prepare()
	f.Fuzz(func(t *testing.T, data []byte, origin string) {
		fz, err := Parse("fuzz.zone", origin, data, nil)
		if err != nil {
			return
		}
		if fz.Records[0].Header().Rrtype != dns.TypeSOA {
			t.Fatalf("first record %v, want the SOA", fz.Records[0])
		}
		v := zone.NewStatic(cfg, []any{fz}, true)
		names := []string{fz.Origin, below("nope", fz.Origin)}
		types := []uint16{dns.TypeA, dns.TypeNS, dns.TypeDS, dns.TypeCNAME, dns.TypeANY, dns.TypeAXFR}
		for _, rr := range fz.Records[:min(len(fz.Records), 64)] { // $GENERATE makes big zones of small files
			h := rr.Header()
			names = append(names, h.Name, below("x", h.Name))
			if !slices.Contains(types, h.Rrtype) {
				types = append(types, h.Rrtype)
			}
		}
		for _, name := range names {
			for _, qtype := range types {
				r := zone.Answer(cfg, v, zone.Question{Name: name, Type: qtype})
				m := new(dns.Msg)
				m.SetQuestion(name, qtype)
				m.Rcode, m.Answer, m.Ns, m.Extra = r.Rcode, r.Answer, r.Ns, r.Extra
				if _, err := m.Pack(); err != nil && len(name) < 250 {
					t.Fatalf("%s %s: answer does not pack: %v", name, dns.TypeToString[qtype], err)
				}
			}
		}
		if s := v.Zone(fz.Origin); len(s.Transfer()) != len(fz.Records)+1 {
			t.Fatalf("transfer of %d records for %d", len(s.Transfer()), len(fz.Records))
		}
	})
}

// below is the name label under name, the root included.
func below(label, name string) string {
	if name == "." {
		return label + "."
	}
	return label + "." + name
}
