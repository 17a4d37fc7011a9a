package dispatch

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/cluster/trust"
	"github.com/shardns/shardns/cluster/wire"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// partSource serves example.org from a cluster whose namespace web has
// services Services, each with one external IP and one port.
func partSource(services int) Source {
	cfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}, External: []string{"example.org."}, ExternalApex: "dns"},
		TTL: 5, NSAddrs: []netip.Addr{netip.MustParseAddr("10.96.0.10")}}
	cfg.External = &zone.External{Zones: cfg.Domains.External, Apex: "dns", TTL: 5}
	cfg.Prepare()
	objs := []any{&model.Namespace{Name: "web"}}
	for i := range services {
		objs = append(objs, &model.Service{Namespace: "web", Name: fmt.Sprintf("service-with-a-long-name-%05d", i),
			ClusterIPs:  []netip.Addr{netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})},
			ExternalIPs: []netip.Addr{netip.AddrFrom4([4]byte{192, 0, byte(i >> 8), byte(i)})},
			Ports:       []model.Port{{Name: "http", Protocol: "TCP", Port: 80}}})
	}
	view := zone.NewStatic(cfg, objs, true)
	return func() (*zone.Config, zone.Reader) { return cfg, view }
}

// A replica gives a namespace's part of a transfer in one message; one
// too large for a message is refused with the reason, never cut; a name
// that is no namespace's part, or another type, is not served.
func TestAnswerPart(t *testing.T) {
	tests := []struct {
		name     string
		services int
		qname    string
		qtype    uint16
		served   bool
		records  int    // in the answer
		wantErr  string // of PartError
	}{
		{name: "a namespace's part", services: 2, qname: "web.example.org.", qtype: dns.TypeAXFR, served: true, records: 6},
		{name: "too large for one message", services: 2000, qname: "web.example.org.", qtype: dns.TypeAXFR, served: true, wantErr: "over the 65535"},
		{name: "a service's name", services: 2, qname: "x.web.example.org.", qtype: dns.TypeAXFR},
		{name: "not an AXFR", services: 2, qname: "web.example.org.", qtype: dns.TypeA},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := answerPart(partSource(tt.services), &wire.ZoneQuery{Id: 7, Zone: "web.svc.cluster.local.", Name: tt.qname, Qtype: uint32(tt.qtype)})
			if r.Served != tt.served || r.Id != 7 {
				t.Fatalf("served %v id %d, want %v 7", r.Served, r.Id, tt.served)
			}
			if !r.Served {
				return
			}
			m := new(dns.Msg)
			if err := m.Unpack(r.Msg); err != nil {
				t.Fatal(err)
			}
			err := zone.ExternalPartError(m)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || len(m.Answer) != 0 {
					t.Fatalf("err %v with %d records, want %q and none", err, len(m.Answer), tt.wantErr)
				}
				return
			}
			if err != nil || len(m.Answer) != tt.records {
				t.Fatalf("err %v, %d records, want %d:\n%v", err, len(m.Answer), tt.records, m.Answer)
			}
		})
	}
}

// Parts of transfers are asked by replicas only.
func TestTransferRoutes(t *testing.T) {
	if Routes(false)[trust.RoleReplica][TransferName] != "shardns.wire.v1.ZoneQuery" {
		t.Fatal("replicas cannot ask for a transfer's parts")
	}
	if _, ok := Routes(false)[trust.RoleNodeLocal][TransferName]; ok {
		t.Fatal("a node-local process may ask for a transfer's parts")
	}
}
