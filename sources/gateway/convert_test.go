package gateway

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func object(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestConvert(t *testing.T) {
	for _, tc := range []struct {
		name    string
		convert convertFunc
		yaml    string
		want    any
	}{
		{
			name: "Gateway: IP addresses, untyped ones too; host names are not resolved", convert: convertGateway,
			yaml: `
metadata: {namespace: infra, name: public}
status:
  addresses:
  - {type: IPAddress, value: 198.51.100.4}
  - {value: "2001:db8::4"}
  - {type: Hostname, value: lb.example.net}
  - {type: IPAddress, value: not-an-ip}`,
			want: &Gateway{Namespace: "infra", Name: "public", Addrs: addrs("198.51.100.4", "2001:db8::4")},
		},
		{
			name: "route: parents of kind Gateway, in the route's namespace unless named", convert: convertRoute(KindHTTPRoute),
			yaml: `
metadata: {namespace: apps, name: a}
spec:
  hostnames: [MyServiceA.foo.org, b.foo.org]
  parentRefs:
  - {name: local, sectionName: https}
  - {name: public, namespace: infra}
  - {name: explicit, group: gateway.networking.k8s.io, kind: Gateway}
  - {name: mesh, group: "", kind: Service}
  - {name: other, group: example.com, kind: Gateway}`,
			want: &Route{Kind: KindHTTPRoute, Namespace: "apps", Name: "a", Hostnames: []string{"myservicea.foo.org", "b.foo.org"},
				Parents: []Gateway{{Namespace: "apps", Name: "local"}, {Namespace: "infra", Name: "public"}, {Namespace: "apps", Name: "explicit"}}},
		},
		{
			name: "Ingress: rule hosts and load balancer IPs", convert: convertIngress,
			yaml: `
metadata: {namespace: apps, name: web}
spec:
  rules:
  - host: A.foo.org
  - http: {}
  - host: b.foo.org
status:
  loadBalancer:
    ingress:
    - ip: 198.51.100.0
    - hostname: lb.example.net
    - ip: "2001:db8::1"`,
			want: &Ingress{Namespace: "apps", Name: "web", Hosts: []string{"a.foo.org", "b.foo.org"}, Addrs: addrs("198.51.100.0", "2001:db8::1")},
		},
		{
			name: "LoadBalancer Service: status addresses", convert: convertService,
			yaml: `
metadata: {namespace: default, name: test}
spec: {type: LoadBalancer}
status: {loadBalancer: {ingress: [{ip: 198.51.100.3}]}}`,
			want: &Service{Namespace: "default", Name: "test", Addrs: addrs("198.51.100.3")},
		},
		{
			name: "LoadBalancer Service: external IPs win over the status", convert: convertService,
			yaml: `
metadata: {namespace: default, name: test}
spec: {type: LoadBalancer, externalIPs: [192.0.2.1]}
status: {loadBalancer: {ingress: [{ip: 198.51.100.3}]}}`,
			want: &Service{Namespace: "default", Name: "test", Addrs: addrs("192.0.2.1")},
		},
		{
			name: "hostname annotation; an invalid coredns.io one gives way to external-dns's", convert: convertService,
			yaml: `
metadata:
  namespace: default
  name: test
  annotations: {coredns.io/hostname: Not_Valid, external-dns.alpha.kubernetes.io/hostname: good.ok}
spec: {type: LoadBalancer}
status: {loadBalancer: {ingress: [{ip: 198.51.100.3}]}}`,
			want: &Service{Namespace: "default", Name: "test", Hostname: "good.ok", Addrs: addrs("198.51.100.3")},
		},
		{
			name: "ClusterIP Service: nothing", convert: convertService,
			yaml: `
metadata: {namespace: default, name: test}
spec: {type: ClusterIP, clusterIP: 10.96.0.10}`,
			want: nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.convert(object(t, tc.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

// An object that does not convert is kept with nothing to answer, and
// reported.
func TestTransformReports(t *testing.T) {
	reported := 0
	tr := transform(convertIngress, func(*unstructured.Unstructured, error) { reported++ })
	got, err := tr(object(t, "metadata: {namespace: apps, name: web}\nspec: {rules: 7}"))
	if err != nil {
		t.Fatal(err)
	}
	it := got.(*item)
	if it.slim != nil || reported != 1 || it.Name != "web" || it.Namespace != "apps" {
		t.Errorf("item %+v after %d reports; want web in apps, nothing to answer, 1 report", it, reported)
	}
}

// Only the kinds configured are watched, with Gateways when a route kind
// is among them.
func TestWatchedKinds(t *testing.T) {
	kinds := func(resources ...string) []string {
		var out []string
		for _, w := range watchedKinds(resources) {
			out = append(out, w.kind)
		}
		return out
	}
	if got := kinds(KindIngress, KindService); !reflect.DeepEqual(got, []string{KindIngress, KindService}) {
		t.Errorf("Ingress Service: %v", got)
	}
	if got := kinds(KindTLSRoute); !reflect.DeepEqual(got, []string{KindTLSRoute, "Gateway"}) {
		t.Errorf("TLSRoute: %v", got)
	}
	if got := kinds(); len(got) != 6 {
		t.Errorf("defaults: %v", got)
	}
}
