package manifest

import (
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// Gaps that FuzzParse reports once they are closed. Each is tolerated until
// then, so the fuzz target keeps looking for new failures; set it to true
// when the fix lands. The seeds of FuzzParse hold a reproducer of each.
const (
	// An EndpointSlice or Pod without metadata.name is accepted (Services
	// and Namespaces are rejected), and keyed with an empty name.
	checkNames = true
	// An IPv6 address with a zone ("fe80::1%eth0") is accepted as a
	// cluster IP or an address: kubeobj parses with netip.ParseAddr, which
	// allows zones. Such a cluster IP gets no PTR record.
	checkZonedIPs = true
)

// seedDemo is deploy/local/demo-cluster.yaml.
const seedDemo = `# A small demo cluster, written as a real kube-apiserver would accept it
# (kubectl apply -f works). Service IPs come from 10.96.0.0/16 and
# fd00:10:96::/112; pod IPs from 10.244.0.0/16.
apiVersion: v1
kind: Namespace
metadata: {name: default}
---
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Namespace
metadata: {name: data}
---
apiVersion: v1
kind: Service
metadata: {name: kubernetes, namespace: default}
spec:
  clusterIP: 10.96.0.1
  ports: [{name: https, port: 443, protocol: TCP}]
---
# ClusterIP service with endpoints.
apiVersion: v1
kind: Service
metadata: {name: frontend, namespace: shop}
spec:
  clusterIP: 10.96.10.10
  selector: {app: frontend}
  ports: [{name: http, port: 80, protocol: TCP, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: frontend-7xk2p
  namespace: shop
  labels: {kubernetes.io/service-name: frontend}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- addresses: [10.244.1.10]
  conditions: {ready: true}
  targetRef: {kind: Pod, name: frontend-6d9f7-abcde, namespace: shop}
- addresses: [10.244.2.11]
  conditions: {ready: true}
  targetRef: {kind: Pod, name: frontend-6d9f7-fghij, namespace: shop}
---
# ClusterIP service with two named ports (SRV for each).
apiVersion: v1
kind: Service
metadata: {name: cart, namespace: shop}
spec:
  clusterIP: 10.96.10.11
  selector: {app: cart}
  ports:
  - {name: http, port: 8080, protocol: TCP}
  - {name: grpc, port: 9090, protocol: TCP}
---
# Dual-stack service: A and AAAA.
apiVersion: v1
kind: Service
metadata: {name: api, namespace: shop}
spec:
  ipFamilyPolicy: RequireDualStack
  ipFamilies: [IPv4, IPv6]
  clusterIP: 10.96.10.12
  clusterIPs: [10.96.10.12, "fd00:10:96::c"]
  selector: {app: api}
  ports: [{name: http, port: 80, protocol: TCP}]
---
# ExternalName service: a CNAME.
apiVersion: v1
kind: Service
metadata: {name: payments, namespace: shop}
spec:
  type: ExternalName
  externalName: payments.example.com
---
# ClusterIP service in a second namespace.
apiVersion: v1
kind: Service
metadata: {name: redis, namespace: data}
spec:
  clusterIP: 10.96.20.10
  selector: {app: redis}
  ports: [{name: redis, port: 6379, protocol: TCP}]
---
# Headless service of a StatefulSet: one name per pod.
apiVersion: v1
kind: Service
metadata: {name: postgres, namespace: data}
spec:
  clusterIP: None
  selector: {app: postgres}
  ports: [{name: pg, port: 5432, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: postgres-q8z4m
  namespace: data
  labels: {kubernetes.io/service-name: postgres}
addressType: IPv4
ports: [{name: pg, port: 5432, protocol: TCP}]
endpoints:
- addresses: [10.244.3.20]
  hostname: postgres-0
  conditions: {ready: true}
  targetRef: {kind: Pod, name: postgres-0, namespace: data}
- addresses: [10.244.3.21]
  hostname: postgres-1
  conditions: {ready: true}
  targetRef: {kind: Pod, name: postgres-1, namespace: data}
- addresses: [10.244.3.22]
  hostname: postgres-2
  conditions: {ready: false}
  targetRef: {kind: Pod, name: postgres-2, namespace: data}
`

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		seedDemo,
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: shop}\nspec:\n  clusterIP: 10.96.0.5\n  clusterIPs: [10.96.0.5, \"fd00::5\"]\n  ports: [{name: http, port: 80}, {name: dns, port: 53, protocol: UDP}]\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: db}\nspec: {clusterIP: None, ports: [{name: pg, port: 5432}]}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: ext, namespace: a}\nspec: {type: ExternalName, externalName: Example.COM.}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: alias, namespace: a}\nspec: {type: ExternalName, externalName: web.a.svc.cluster.local}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: a}\nspec: {clusterIP: \"::ffff:10.0.0.1\"}\n",
		"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: db-1, labels: {kubernetes.io/service-name: db}}\naddressType: IPv4\nports: [{name: pg, port: 5432, protocol: TCP}, {name: all}]\nendpoints:\n- addresses: [10.1.0.1]\n  hostname: db-0\n- addresses: [10.1.0.2]\n  conditions: {ready: false}\n- addresses: [\"fd00::1\"]\n  targetRef: {kind: Pod, name: db-x}\n",
		"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: f, labels: {kubernetes.io/service-name: x}}\naddressType: FQDN\nendpoints: [{addresses: [example.com]}]\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: a}\nstatus: {podIP: 10.244.0.1, podIPs: [{ip: 10.244.0.1}, {ip: \"fd00::1\"}]}\n",
		"apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Namespace, metadata: {name: x}}\n- {apiVersion: v1, kind: Service, metadata: {name: s, namespace: x}, spec: {clusterIP: 10.0.0.1}}\n- {apiVersion: v1, kind: List, items: [{apiVersion: v1, kind: Namespace, metadata: {name: y}}]}\n",
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: ignored}\n---\n# comments only\n---\n",
		// Broken ones.
		"apiVersion: v1\nkind: Service\nmetadata: [\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {clusterIP: 1.2.3}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: 99999}], clusterIP: 10.0.0.1}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: e}\nspec: {type: ExternalName}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: 5}\n",
		"apiVersion: v1\nmetadata: {name: x}\n",
		"kind: Service\nmetadata: {name: x}\n",
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n",
		"apiVersion: v1\nkind: List\nitems: [1, 2]\n",
		"a: &a [*a, *a]\n",
		"\t\x00\xff",
		// Reproducers of the gaps above.
		"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {labels: {kubernetes.io/service-name: db}}\naddressType: IPv4\nendpoints: [{addresses: [10.1.0.1]}]\n---\napiVersion: v1\nkind: Pod\nmetadata: {namespace: a}\nstatus: {podIP: 10.244.0.1}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: z}\nspec: {clusterIP: \"fe80::1%eth0\"}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := Parse("f.yaml", data)
		if err != nil {
			if objs != nil {
				t.Fatalf("error %v with objects", err)
			}
			if !strings.HasPrefix(err.Error(), "f.yaml: document ") {
				t.Fatalf("error %q does not name the file and document", err)
			}
			return
		}
		for key, obj := range objs {
			checkObject(t, key, obj)
		}
		withImpliedNamespaces(objs)
		for key, obj := range objs {
			checkObject(t, key, obj)
		}
		s := &Snapshot{objects: objs}
		if changes := s.Diff(nil); len(changes) != len(objs) {
			t.Fatalf("diff from nothing has %d changes for %d objects", len(changes), len(objs))
		}
		if changes := s.Diff(s); len(changes) != 0 {
			t.Fatalf("diff from itself: %+v", changes)
		}
		probeZones(t, objs)
	})
}

// checkObject holds the invariants of every parsed object.
func checkObject(t *testing.T, key model.Key, obj any) {
	t.Helper()
	if key.Name == "" && (checkNames || key.Kind == model.KindNamespace || key.Kind == model.KindService) {
		t.Fatalf("%s accepted without a name", key)
	}
	var got model.Key
	switch o := obj.(type) {
	case *model.Namespace:
		got = o.Key()
	case *model.Service:
		got = o.Key()
		for _, p := range o.Ports {
			if p.Port < 1 || p.Port > 65535 {
				t.Fatalf("%s: port %d accepted", key, p.Port)
			}
		}
		switch o.Type {
		case model.ServiceClusterIP:
			if len(o.ClusterIPs) == 0 {
				t.Fatalf("%s: ClusterIP service without cluster IPs", key)
			}
		case model.ServiceExternalName:
			if !strings.HasSuffix(o.ExternalName, ".") || o.ExternalName != strings.ToLower(o.ExternalName) {
				t.Fatalf("%s: external name %q is not lower-case and fully qualified", key, o.ExternalName)
			}
		}
		if o.Type != model.ServiceClusterIP && len(o.ClusterIPs) > 0 {
			t.Fatalf("%s: cluster IPs on a service of type %d", key, o.Type)
		}
		checkAddrs(t, key, o.ClusterIPs)
	case *model.EndpointSlice:
		got = o.Key()
		if o.ServiceName == "" {
			t.Fatalf("%s: slice of no service accepted", key)
		}
		for _, p := range o.Ports {
			if p.Port < 1 || p.Port > 65535 {
				t.Fatalf("%s: port %d accepted", key, p.Port)
			}
		}
		for _, ep := range o.Endpoints {
			checkAddrs(t, key, ep.Addresses)
		}
	case *model.Pod:
		got = o.Key()
		checkAddrs(t, key, o.IPs)
	default:
		t.Fatalf("%s: unexpected object %T", key, obj)
	}
	if got != key {
		t.Fatalf("object of key %s has key %s", key, got)
	}
	if (key.Kind == model.KindNamespace) != (key.Namespace == "") {
		t.Fatalf("key %s: namespace %q", key, key.Namespace)
	}
}

func checkAddrs(t *testing.T, key model.Key, addrs []netip.Addr) {
	t.Helper()
	for _, a := range addrs {
		if !a.IsValid() || a.Is4In6() {
			t.Fatalf("%s: address %v accepted", key, a)
		}
		if checkZonedIPs && a.Zone() != "" {
			t.Fatalf("%s: address %v with a zone accepted", key, a)
		}
	}
}

// dns1123 is a Kubernetes object name that is also a DNS label.
var dns1123 = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// podView adds the pod zones (pods: verified) to a Static.
type podView struct {
	*zone.Static
	pods map[string]*zone.Snapshot
}

func (v podView) Remote(string) []string { return nil }

func (v podView) Zone(key string) *zone.Snapshot {
	if s := v.pods[key]; s != nil {
		return s
	}
	return v.Static.Zone(key)
}

// probeZones builds the zones of objs, as the zone actors would, and asks
// the names each object makes: building and answering never panic, the
// answers pack or fail cleanly, and the cluster IPs of well-named ClusterIP
// services answer A, AAAA and PTR.
func probeZones(t *testing.T, objs map[model.Key]any) {
	t.Helper()
	for _, pods := range []zone.PodMode{zone.PodsInsecure, zone.PodsVerified} {
		cfg := &zone.Config{
			Domains: zone.Domains{Cluster: []string{"cluster.local."}, Reverse: []string{"in-addr.arpa.", "ip6.arpa."},
				PodZones: pods == zone.PodsVerified},
			TTL:              5,
			Pods:             pods,
			EndpointPodNames: pods == zone.PodsVerified,
			NSAddrs:          []netip.Addr{netip.MustParseAddr("10.96.0.10")},
		}
		cfg.Prepare()
		list := make([]any, 0, len(objs))
		for _, k := range sortedKeys(objs) {
			list = append(list, objs[k])
		}
		v := podView{Static: zone.NewStatic(cfg, list, true), pods: map[string]*zone.Snapshot{}}
		byZone := map[string]map[string]*model.Pod{}
		for _, o := range list {
			if p, ok := o.(*model.Pod); ok {
				key := zone.PodZoneKey(p.Namespace, cfg.Primary())
				if byZone[key] == nil {
					byZone[key] = map[string]*model.Pod{}
				}
				byZone[key][p.Name] = p
			}
		}
		for key, ps := range byZone {
			v.pods[key] = zone.BuildPodZone(cfg, key, cfg.Primary(), 1, ps)
		}

		ask := func(name string, qtype uint16) zone.Response {
			name = zone.Fqdn(name)
			r := zone.Answer(cfg, v, zone.Question{Name: name, Type: qtype})
			if r.External {
				t.Fatalf("%s is outside the cluster", name)
			}
			m := new(dns.Msg)
			m.SetQuestion(name, qtype)
			m.Rcode, m.Answer, m.Ns, m.Extra = r.Rcode, r.Answer, r.Ns, r.Extra
			m.Pack() // an object name that is no DNS name may not pack; it must not panic
			return r
		}
		for _, o := range list {
			switch o := o.(type) {
			case *model.Service:
				base := o.Name + "." + o.Namespace + ".svc.cluster.local"
				for _, q := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeCNAME, dns.TypeTXT} {
					ask(base, q)
				}
				ask(o.Namespace+".svc.cluster.local", dns.TypeA)
				for _, p := range o.Ports {
					ask("_"+p.Name+"._"+p.Protocol+"."+base, dns.TypeSRV)
				}
				checkClusterIPs(t, o, ask)
			case *model.EndpointSlice:
				base := o.ServiceName + "." + o.Namespace + ".svc.cluster.local"
				for _, ep := range o.Endpoints {
					for _, a := range ep.Addresses {
						ask(zone.EndpointHostname(ep, a, cfg.EndpointPodNames)+"."+base, dns.TypeA)
						ask(zone.ReverseName(a), dns.TypePTR)
					}
				}
			case *model.Pod:
				for _, a := range o.IPs {
					ask(zone.PodLabel(a)+"."+o.Namespace+".pod.cluster.local", dns.TypeA)
					ask(zone.PodLabel(a)+"."+o.Namespace+".pod.cluster.local", dns.TypeAAAA)
				}
			}
		}
	}
}

// checkClusterIPs: a ClusterIP service with ports whose name and namespace
// are DNS labels answers its cluster IPs, and each of them has a PTR. (As
// in CoreDNS, a ClusterIP service without ports has no records; the API
// server requires ports.)
func checkClusterIPs(t *testing.T, s *model.Service, ask func(string, uint16) zone.Response) {
	t.Helper()
	if s.Type != model.ServiceClusterIP || len(s.Ports) == 0 || !dns1123.MatchString(s.Name) || !dns1123.MatchString(s.Namespace) {
		return
	}
	base := s.Name + "." + s.Namespace + ".svc.cluster.local"
	var want4, want6, got4, got6 []string
	for _, ip := range s.ClusterIPs {
		if ip.Zone() != "" && !checkZonedIPs {
			return
		}
		if ip.Is4() {
			want4 = append(want4, ip.String())
		} else {
			want6 = append(want6, ip.String())
		}
		if r := ask(zone.ReverseName(ip), dns.TypePTR); len(r.Answer) == 0 {
			t.Fatalf("cluster IP %v of %s has no PTR: rcode %s", ip, base, dns.RcodeToString[r.Rcode])
		}
	}
	for _, rr := range ask(base, dns.TypeA).Answer {
		got4 = append(got4, rr.(*dns.A).A.String())
	}
	for _, rr := range ask(base, dns.TypeAAAA).Answer {
		got6 = append(got6, rr.(*dns.AAAA).AAAA.String())
	}
	for _, c := range []struct{ got, want []string }{{got4, want4}, {got6, want6}} {
		slices.Sort(c.got)
		slices.Sort(c.want)
		if !slices.Equal(c.got, slices.Compact(c.want)) {
			t.Fatalf("%s answers %v, want its cluster IPs %v", base, c.got, c.want)
		}
	}
}
