package zone

import (
	"fmt"
	"slices"
	"testing"

	"github.com/shardns/shardns/model"
)

// ZonesOf is the one answer to "which zones does this change go to", for
// the zone manager and for static readers alike.
func TestZonesOf(t *testing.T) {
	plain := testConfig()
	twoDomains := testConfig()
	twoDomains.Domains.Cluster = []string{"cluster.local.", "corp.local."}
	twoDomains.Prepare()
	pods := testConfig()
	pods.Pods, pods.Domains.PodZones = PodsVerified, true
	pods.Prepare()
	mc := multiclusterConfig()
	mesh := meshConfig()
	svc := &model.Service{Namespace: "ns1", Name: "web", ClusterIPs: ips("10.0.0.1", "fd00::1")}
	slice := &model.EndpointSlice{Namespace: "ns1", Name: "web-1", ServiceName: "web",
		Endpoints: []model.Endpoint{{Addresses: ips("172.16.0.1"), Ready: true}}}
	pod := &model.Pod{Namespace: "ns1", Name: "p", IPs: ips("10.1.2.3")}
	imp := &model.ServiceImport{Namespace: "ns1", Name: "web", IPs: ips("10.42.0.1")}
	entry := serviceEntry("ns1", "e", []string{"a.example.org", "b.example.org", "c.other.org"}, "240.0.0.1")
	file := &FileZone{Origin: "example.com."}
	for _, tc := range []struct {
		name string
		cfg  *Config
		key  model.Key
		obj  any
		want []string // "key part" sorted; reverse zones with their PTR count
	}{
		{"service: its zone and its reverse zones", plain, svc.Key(), svc,
			[]string{"0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa. ptrs:1", "0.0.10.in-addr.arpa. ptrs:1", "ns1.svc.cluster.local. services"}},
		{"service deleted: its zone alone", plain, svc.Key(), nil, []string{"ns1.svc.cluster.local. services"}},
		{"service in every cluster domain", twoDomains, svc.Key(), nil,
			[]string{"ns1.svc.cluster.local. services", "ns1.svc.corp.local. services"}},
		{"endpoint slice: its zone and the reverse zone of its addresses", plain, slice.Key(), slice,
			[]string{"0.16.172.in-addr.arpa. ptrs:1", "ns1.svc.cluster.local. services"}},
		{"pod without pod zones: nowhere", plain, pod.Key(), pod, nil},
		{"pod with pod zones: its namespace's pod zone", pods, pod.Key(), pod, []string{"ns1.pod.cluster.local. pods"}},
		{"pod deleted: its pod zone", pods, pod.Key(), nil, []string{"ns1.pod.cluster.local. pods"}},
		{"import without a multicluster zone: nowhere", plain, imp.Key(), imp, nil},
		{"import: the first cluster domain's service zone", mc, imp.Key(), imp, []string{"ns1.svc.cluster.local. imported"}},
		{"service entry: the parent zones of its hosts", mesh, entry.Key(), entry,
			[]string{"example.org. mesh:2", "other.org. mesh:1"}},
		{"service entry deleted: known only from before", mesh, entry.Key(), nil, nil},
		{"zone file: its origin", plain, model.Key{Kind: model.KindZoneFile, Name: "Example.COM"}, file, []string{"example.com. file"}},
		{"namespace: no zone", plain, model.Key{Kind: model.KindNamespace, Name: "ns1"}, &model.Namespace{Name: "ns1"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			zones, _ := ZonesOf(tc.cfg, tc.key, tc.obj)
			var got []string
			for _, z := range zones {
				got = append(got, describeContribution(z))
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("zones %q, want %q", got, tc.want)
			}
		})
	}
}

func describeContribution(z Contribution) string {
	switch z.Part {
	case PartServices:
		return z.Key + " services"
	case PartImported:
		return z.Key + " imported"
	case PartPTRs:
		return fmt.Sprintf("%s ptrs:%d", z.Key, len(z.PTRs))
	case PartPods:
		return z.Key + " pods"
	case PartMesh:
		return fmt.Sprintf("%s mesh:%d", z.Key, len(z.Mesh))
	}
	return z.Key + " file"
}

// A static reader holds the zones a running node builds: pod zones when
// pods are verified, no imported names without a multicluster zone.
func TestStaticViewRoutesAsTheManager(t *testing.T) {
	pods := testConfig()
	pods.Pods, pods.Domains.PodZones = PodsVerified, true
	pods.Prepare()
	objs := append(testCluster(), &model.Pod{Namespace: "ns1", Name: "p", IPs: ips("10.1.2.3")},
		&model.ServiceImport{Namespace: "ns1", Name: "web", IPs: ips("10.42.0.1")})
	v := NewStatic(pods, objs, true)
	if v.Zone(PodZoneKey("ns1", "cluster.local.")) == nil {
		t.Error("no pod zone for ns1 with pods verified")
	}
	if z := v.Zone(ServiceZoneKey("ns1", "cluster.local.")); z == nil || z.Imported != nil {
		t.Error("ns1's service zone is missing or holds imports without a multicluster zone")
	}
}
