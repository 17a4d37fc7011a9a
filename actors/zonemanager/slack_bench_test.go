package zonemanager_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"runtime"
	"runtime/metrics"
	"slices"
	"testing"
	"time"

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/model"
)

// BenchmarkLoadShareSlack loads through a Manager what the largest of six
// replicas holds in the sharded ingest bench at 20k services (24 of its
// 100 namespaces: 4,800 services of 10 endpoints, 70% with a cluster IP
// in 10.96.0.0/16, the endpoints of ten services of ten namespaces in each
// /24), then reads the heap after a collection:
//
//   - live-B/service: what the loaded zones keep;
//   - slack-B/service: what the spans in use hold free beside it, which
//     RSS pays for as much as for live objects;
//   - fillable-%: how much of the heap's slack new objects take before
//     the heap needs a new span, found by allocating objects of each size
//     class in turn, and top-class-%: the share of that in the one size
//     class that has the most.
//
// A slack mostly fillable and spread over many size classes is the
// allocator's: long-lived objects of every size made among the garbage
// of the builds. No one structure's layout would remove it.
func BenchmarkLoadShareSlack(b *testing.B) {
	const services, namespaces = 20000, 100
	var changes []model.Change
	held := 0
	for i := range services {
		if (i%namespaces)*37%namespaces >= 24 { // 24 namespaces spread over the hash of i
			continue
		}
		held++
		changes = append(changes, benchService(fmt.Sprintf("bench%d", i%namespaces), fmt.Sprintf("svc%d", i), i, func(e int) netip.Addr {
			return netip.AddrFrom4([4]byte{10, byte(200 + i/2500), byte(i / 10 % 250), byte(i%10*20 + e + 1)})
		})...)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var live, slack, fillable, topClass float64
	first := true
	for b.Loop() {
		b.StopTimer()
		before := heapAfterCollection()
		m := startBenchManager(logger)
		b.StartTimer()
		m.load(changes)
		b.StopTimer()
		after := heapAfterCollection()
		live += float64(after.HeapAlloc) - float64(before.HeapAlloc)
		// The slack is read once, on a heap that held only the changes:
		// a later load fills the holes the one before it left.
		if first {
			first = false
			slack = float64(after.HeapInuse-after.HeapAlloc) - float64(before.HeapInuse-before.HeapAlloc)
			all, top := fillableSlack(after.BySize[:])
			fillable, topClass = all/float64(after.HeapInuse-after.HeapAlloc), top/all
		}
		m.stop()
		b.StartTimer()
	}
	b.ReportMetric(live/float64(b.N)/float64(held), "live-B/service")
	b.ReportMetric(slack/float64(held), "slack-B/service")
	b.ReportMetric(100*fillable, "fillable-%")
	b.ReportMetric(100*topClass, "top-class-%")
}

// benchService returns what a list brings of service i of the ingest
// bench, named name in namespace ns: its Service (a cluster IP in
// 10.96.0.0/16 for 7 in 10, headless otherwise) and an EndpointSlice of
// ten ready endpoints at addr(0)…addr(9), frozen as the Kubernetes source
// sends them.
func benchService(ns, name string, i int, addr func(e int) netip.Addr) []model.Change {
	svc := &model.Service{Namespace: ns, Name: name, Type: model.ServiceClusterIP,
		Ports: []model.Port{{Name: "http", Protocol: "TCP", Port: 80}}}
	if i%10 < 7 {
		ip := uint32(i) * 7919 % 65536
		svc.ClusterIPs = []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(ip >> 8), byte(ip)})}
	} else {
		svc.Type = model.ServiceHeadless
	}
	slice := &model.EndpointSlice{Namespace: ns, Name: name + "-1", ServiceName: name,
		Ports: []model.Port{{Name: "http", Protocol: "TCP", Port: 80}}}
	for e := range 10 {
		slice.Endpoints = append(slice.Endpoints, model.Endpoint{Ready: true, Hostname: fmt.Sprintf("host-%d", e),
			Addresses: []netip.Addr{addr(e)}})
	}
	var changes []model.Change
	for _, obj := range []interface{ Key() model.Key }{svc, slice} {
		frozen, _ := model.Freeze(obj)
		changes = append(changes, model.Change{Key: obj.Key(), Object: frozen})
	}
	return changes
}

// heapAfterCollection collects and returns the heap's statistics.
func heapAfterCollection() *runtime.MemStats {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return &m
}

// fillableSlack allocates objects of each small size class, with and
// without pointers (spans of each kind apart), until the heap takes a new
// span for them, and returns the bytes they filled: all classes', and the
// most any one class filled. The objects are dropped on return.
func fillableSlack(classes []struct {
	Size    uint32
	Mallocs uint64
	Frees   uint64
}) (all, top float64) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // one allocation cache, the one filled
	// Made before the first reading: the probe's own allocations would
	// take spans of their own classes and stop it early.
	noPointers := make([][]byte, 0, 1<<20)
	pointers := make([][]*byte, 0, 1<<20)
	spans := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
	inUse := func() uint64 {
		metrics.Read(spans)
		return spans[0].Value.Uint64() + spans[1].Value.Uint64()
	}
	seen := map[uint32]bool{}
	for _, c := range classes {
		if c.Size < 16 || seen[c.Size] { // below 16 bytes, objects without pointers share 16-byte blocks
			continue
		}
		seen[c.Size] = true
		for _, withPointers := range []bool{false, true} {
			start, n := inUse(), 0
			for inUse() < start+8192 && len(noPointers) < cap(noPointers) && len(pointers) < cap(pointers) {
				if withPointers {
					words := c.Size / 8
					if c.Size > 512 {
						words-- // a header word precedes larger objects with pointers
					}
					pointers = append(pointers, make([]*byte, words))
				} else {
					noPointers = append(noPointers, make([]byte, c.Size))
				}
				n++
			}
			filled := float64(max(n-1, 0)) * float64(c.Size) // the last took a new span
			all += filled
			top = max(top, filled)
		}
	}
	runtime.KeepAlive(noPointers)
	runtime.KeepAlive(pointers)
	return all, top
}

// BenchmarkHandoffSlack loads what the largest of three replicas holds
// at 20k services (33 namespaces of 200 services of 10 endpoints, as a
// list sends them: namespace after namespace), then deletes 9 of those
// namespaces, as the largest of six would have handed them over, and
// reads the heap's slack after a collection, against loading the 24
// namespaces kept alone: slack-B/service and direct-slack-B/service, per
// service kept.
func BenchmarkHandoffSlack(b *testing.B) {
	const perNamespace, kept, lost = 200, 24, 9
	changesOf := func(ns int) []model.Change {
		var changes []model.Change
		for s := range perNamespace {
			changes = append(changes, benchService(fmt.Sprintf("bench%d", ns), fmt.Sprintf("svc%d", s), ns*perNamespace+s, func(e int) netip.Addr {
				return netip.AddrFrom4([4]byte{10, byte(200 + s/25), byte(ns), byte(s%25*10 + e + 1)})
			})...)
		}
		return changes
	}
	// The namespaces lost lie among those kept, as hashing spreads them.
	isLost := func(ns int) bool { return ns%11 == 3 }
	// The reverse zones that hold PTRs of a lost namespace: the cluster
	// IPs' /24s and its endpoints' own.
	var reverseKeys []string
	for b := range 256 {
		reverseKeys = append(reverseKeys, fmt.Sprintf("%d.96.10.in-addr.arpa.", b))
	}
	for ns := range 100 {
		for b := range perNamespace / 25 {
			if isLost(ns) {
				reverseKeys = append(reverseKeys, fmt.Sprintf("%d.%d.10.in-addr.arpa.", ns, 200+b))
			}
		}
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var handoff, direct float64
	for b.Loop() {
		for _, handOver := range []bool{true, false} {
			b.StopTimer()
			var all, deletes []model.Change
			var lostNamespaces []string
			for ns, k, l := 0, 0, 0; k < kept || (handOver && l < lost); ns++ {
				switch {
				case isLost(ns) && l < lost:
					l++
					if handOver {
						all = append(all, changesOf(ns)...)
						lostNamespaces = append(lostNamespaces, fmt.Sprintf("bench%d", ns))
					}
				case !isLost(ns) && k < kept:
					k++
					all = append(all, changesOf(ns)...)
				}
			}
			keptChanges := make([]model.Change, 0, len(all))
			for _, c := range all {
				if slices.Contains(lostNamespaces, c.Key.Namespace) {
					deletes = append(deletes, model.Change{Key: c.Key})
				} else {
					keptChanges = append(keptChanges, c)
				}
			}
			before := heapAfterCollection()
			m := startBenchManager(logger)
			b.StartTimer()
			m.load(all)
			all = nil
			if len(deletes) > 0 {
				m.system.Root.Send(m.manager, &zonemanager.Apply{Source: "bench", Changes: deletes})
				deletes = nil
				for !m.holdsNone(lostNamespaces, reverseKeys) {
					time.Sleep(time.Millisecond)
				}
			}
			b.StopTimer()
			after := heapAfterCollection()
			slack := float64(after.HeapInuse-after.HeapAlloc) - float64(before.HeapInuse-before.HeapAlloc)
			if handOver {
				handoff += slack / float64(kept*perNamespace)
			} else {
				direct += slack / float64(kept*perNamespace)
			}
			runtime.KeepAlive(keptChanges)
			m.stop()
			b.StartTimer()
		}
	}
	b.ReportMetric(handoff/float64(b.N), "slack-B/service")
	b.ReportMetric(direct/float64(b.N), "direct-slack-B/service")
}

// holdsNone reports whether the manager's zones hold nothing of the
// namespaces named: their service zones are gone or empty, and none of
// the reverse zones keyed lists a PTR of theirs.
func (m *benchManager) holdsNone(namespaces, reverseKeys []string) bool {
	for _, ns := range namespaces {
		if slot := m.table.SlotOf(ns + ".svc.cluster.local."); slot != nil {
			if s := slot.Load(); s != nil && (len(s.Services) > 0 || len(s.Slices) > 0) {
				return false
			}
		}
	}
	for _, key := range reverseKeys {
		if slot := m.table.SlotOf(key); slot != nil && slot.Load() != nil {
			for _, src := range slot.Load().PTRs {
				if slices.Contains(namespaces, src.Source.Namespace) {
					return false
				}
			}
		}
	}
	return true
}
