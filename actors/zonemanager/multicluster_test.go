package zonemanager_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// ServiceImports and imported slices reach the service zone of their
// namespace: clusterset.local names answer from them as they come,
// change and go, and the cluster's own names stay as they were. That a
// namespace whose only objects were imports holds no zone once they go
// is the routing's (TestRoutesApply, TestStateStepApplied).
func TestMulticlusterObjectsFollowTheirChanges(t *testing.T) {
	cfg, table, system, manager := startZones(t, zone.Domains{Cluster: []string{"cluster.local."},
		Multicluster: []string{"clusterset.local."}})
	apply := func(changes ...model.Change) {
		system.Root.Send(manager, &zonemanager.Apply{Source: "kubernetes", Changes: changes})
	}
	upsert := func(obj interface{ Key() model.Key }) model.Change {
		f, ok := model.Freeze(obj)
		if !ok {
			t.Fatalf("%T does not freeze", obj)
		}
		return model.Change{Key: obj.Key(), Object: f}
	}
	http := model.Port{Name: "http", Protocol: "TCP", Port: 80}
	ns := &model.Namespace{Name: "shop"}
	web := &model.ServiceImport{Namespace: "shop", Name: "web", IPs: []netip.Addr{netip.MustParseAddr("10.42.0.1")}, Ports: []model.Port{http}}
	db := &model.ServiceImport{Namespace: "shop", Name: "db", Headless: true, Ports: []model.Port{http}}
	east := &model.MultiClusterSlice{ClusterID: "east", EndpointSlice: model.EndpointSlice{Namespace: "shop", Name: "db-east",
		ServiceName: "db", Ports: []model.Port{http}, Endpoints: []model.Endpoint{
			{Addresses: []netip.Addr{netip.MustParseAddr("172.20.0.1")}, Hostname: "db-0", Ready: true}}}}
	apply(model.Change{Key: ns.Key(), Object: ns}, upsert(web), upsert(db), upsert(east))
	system.Root.Send(manager, &zonemanager.Synced{Source: "kubernetes"})

	answers := func(name string, rcode int, want ...string) func() error {
		return func() error {
			r := zone.Answer(cfg, table, zone.Question{Name: name, Type: dns.TypeA})
			var got []string
			for _, rr := range r.Answer {
				got = append(got, rr.(*dns.A).A.String())
			}
			if r.Rcode != rcode || strings.Join(got, ",") != strings.Join(want, ",") {
				return fmt.Errorf("%s: %s %v, want %s %v", name, dns.RcodeToString[r.Rcode], got, dns.RcodeToString[rcode], want)
			}
			return nil
		}
	}
	eventually := func(name string, rcode int, want ...string) {
		t.Helper()
		testutil.Eventually(t, 5*time.Second, answers(name, rcode, want...))
	}
	eventually("web.shop.svc.clusterset.local.", dns.RcodeSuccess, "10.42.0.1")
	eventually("db.shop.svc.clusterset.local.", dns.RcodeSuccess, "172.20.0.1")
	eventually("db-0.east.db.shop.svc.clusterset.local.", dns.RcodeSuccess, "172.20.0.1")
	eventually("web.shop.svc.cluster.local.", dns.RcodeNameError)

	moved := *web
	moved.IPs = []netip.Addr{netip.MustParseAddr("10.42.0.2")}
	apply(upsert(&moved), model.Change{Key: east.Key()})
	eventually("web.shop.svc.clusterset.local.", dns.RcodeSuccess, "10.42.0.2")
	eventually("db.shop.svc.clusterset.local.", dns.RcodeNameError)

	apply(model.Change{Key: web.Key()}, model.Change{Key: db.Key()})
	eventually("web.shop.svc.clusterset.local.", dns.RcodeNameError)
}
