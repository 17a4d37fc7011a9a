package zonemanager_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// A service zone actor builds again only the services a batch touched.
// After every batch of random changes (addresses, readiness, slices that
// move to another service or go, services that come, change type and go)
// the zone answers every name exactly as a zone built whole from the
// objects applied so far. Services whose names differ in case only share
// their names, the later in name order winning, as in a whole build.
func TestServiceZoneAnswersAsItsObjectsAfterEveryBatch(t *testing.T) {
	cfg, table, system, manager := startKubernetesZones(t)

	http := model.Port{Name: "http", Protocol: "TCP", Port: 80}
	objects := map[model.Key]any{}
	ns := &model.Namespace{Name: "shop"}
	objects[ns.Key()] = ns
	var changes []model.Change
	set := func(obj interface{ Key() model.Key }) {
		objects[obj.Key()] = obj
		f, ok := model.Freeze(obj)
		if !ok {
			t.Fatalf("%T does not freeze", obj)
		}
		changes = append(changes, model.Change{Key: obj.Key(), Object: f})
	}
	remove := func(k model.Key) {
		delete(objects, k)
		changes = append(changes, model.Change{Key: k})
	}
	rng := rand.New(rand.NewPCG(3, 5))
	const services = 12
	for i := range services {
		set(&model.Service{Namespace: "shop", Name: fmt.Sprintf("s%d", i), Ports: []model.Port{http},
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, 0, byte(i + 1)})}})
	}
	slice := func(name, service string, step int) *model.EndpointSlice {
		sl := &model.EndpointSlice{Namespace: "shop", Name: name, ServiceName: service, Ports: []model.Port{http}}
		for e := range 3 {
			sl.Endpoints = append(sl.Endpoints, model.Endpoint{Hostname: fmt.Sprintf("h%d", e), Ready: rng.IntN(5) > 0,
				Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, 1, byte(step), byte(10*e + rng.IntN(10) + 1)})}})
		}
		return sl
	}
	for i := range services {
		set(slice(fmt.Sprintf("s%d-a", i), fmt.Sprintf("s%d", i), 0))
	}
	system.Root.Send(manager, &zonemanager.Apply{Source: "kubernetes", Changes: append([]model.Change{{Key: ns.Key(), Object: ns}}, changes...)})
	system.Root.Send(manager, &zonemanager.Synced{Source: "kubernetes"})
	changes = nil

	// Every name a client could ask, by type.
	var questions []zone.Question
	for i := range services {
		base := fmt.Sprintf("s%d.shop.svc.cluster.local.", i)
		for _, name := range []string{base, "_http._tcp." + base, "h0." + base, "h1." + base, "h2." + base} {
			for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV} {
				questions = append(questions, zone.Question{Name: name, Type: qtype})
			}
		}
	}
	answers := func(v zone.Reader) []string {
		var out []string
		for _, q := range questions {
			r := zone.Answer(cfg, v, q)
			out = append(out, fmt.Sprintf("%s %s: %s", q.Name, dns.TypeToString[q.Type], dns.RcodeToString[r.Rcode]))
			for _, rr := range append(r.Answer, r.Extra...) {
				out = append(out, rr.String())
			}
		}
		return out
	}
	for step := 1; step <= 30; step++ {
		for range 1 + rng.IntN(4) {
			i := rng.IntN(services)
			svc, sl := fmt.Sprintf("s%d", i), fmt.Sprintf("s%d-a", i)
			switch rng.IntN(6) {
			case 0, 1: // new addresses and readiness
				set(slice(sl, svc, step))
			case 2: // the slice serves another service, or goes
				if rng.IntN(2) == 0 {
					set(slice(sl, fmt.Sprintf("s%d", rng.IntN(services)), step))
				} else {
					remove(model.Key{Kind: model.KindEndpointSlice, Namespace: "shop", Name: sl})
				}
			case 3: // the service becomes headless or comes back with a cluster IP
				s := &model.Service{Namespace: "shop", Name: svc, Ports: []model.Port{http}, Type: model.ServiceHeadless}
				if rng.IntN(2) == 0 {
					s.Type, s.ClusterIPs = model.ServiceClusterIP, []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(step), byte(i + 1)})}
				}
				set(s)
			case 4: // the service goes
				remove(model.Key{Kind: model.KindService, Namespace: "shop", Name: svc})
			case 5: // a Service named as the label in capitals (from a file, say) comes or goes
				twin := &model.Service{Namespace: "shop", Name: "S" + svc[1:], Ports: []model.Port{http},
					ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 95, byte(step), byte(i + 1)})}}
				if _, ok := objects[twin.Key()]; ok {
					remove(twin.Key())
				} else {
					set(twin)
				}
			}
		}
		system.Root.Send(manager, &zonemanager.Apply{Source: "kubernetes", Changes: changes})
		changes = nil
		want := answers(zone.NewStatic(cfg, slices.Collect(maps.Values(objects)), true))
		testutil.Eventually(t, 10*time.Second, func() error {
			if got := answers(table); !slices.Equal(got, want) {
				return fmt.Errorf("after batch %d the zone answers\n%v\nwhere the zone built whole answers\n%v", step, got, want)
			}
			return nil
		})
	}
}
