package manifest

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/shardns/shardns/model"
)

func TestParseKinds(t *testing.T) {
	data := `
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: shop}
spec:
  clusterIP: 10.96.0.5
  clusterIPs: [10.96.0.5, "fd00::5"]
  ports: [{name: http, port: 80}]
---
apiVersion: v1
kind: Service
metadata: {name: db}
spec: {clusterIP: None}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: db-1, labels: {kubernetes.io/service-name: db}}
addressType: IPv4
ports: [{name: pg, port: 5432, protocol: TCP}]
endpoints:
- addresses: [10.1.0.1]
  hostname: db-0
- addresses: [10.1.0.2]
  conditions: {ready: false}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: ignored}
---
# comments only
`
	objs, err := Parse("x.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 4 {
		t.Fatalf("got %d objects, want 4 (the Deployment is skipped)", len(objs))
	}
	web := objs[model.Key{Kind: model.KindService, Namespace: "shop", Name: "web"}].(*model.Service)
	if len(web.ClusterIPs) != 2 || web.ClusterIPs[1] != netip.MustParseAddr("fd00::5") || web.Ports[0].Protocol != "TCP" {
		t.Fatalf("web = %+v", web)
	}
	db := objs[model.Key{Kind: model.KindService, Namespace: "default", Name: "db"}].(*model.Service)
	if db.Type != model.ServiceHeadless {
		t.Fatalf("db = %+v, want headless in namespace default", db)
	}
	sl := objs[model.Key{Kind: model.KindEndpointSlice, Namespace: "default", Name: "db-1"}].(*model.EndpointSlice)
	if sl.ServiceName != "db" || !sl.Endpoints[0].Ready || sl.Endpoints[1].Ready || sl.Endpoints[0].Hostname != "db-0" {
		t.Fatalf("slice = %+v", sl)
	}
}

// Errors name the file, the document and the object.
func TestParseErrors(t *testing.T) {
	cases := []struct {
		name, data string
		want       []string
	}{
		{"bad ip", "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {clusterIP: 1.2.3}\n",
			[]string{"f.yaml", "document 1", `Service "web"`, "1.2.3"}},
		{"second document", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: [{port: 99999}], clusterIP: 10.0.0.1}\n",
			[]string{"document 2", `Service "x"`, "port"}},
		{"bad yaml", "apiVersion: v1\nkind: Service\nmetadata: [\n", []string{"f.yaml", "document 1"}},
		{"no kind", "apiVersion: v1\nmetadata: {name: x}\n", []string{"kind is missing"}},
		{"wrong field type", "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: 5}\n", []string{`Service "web"`}},
		{"duplicate", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n",
			[]string{"defined twice"}},
		{"external name", "apiVersion: v1\nkind: Service\nmetadata: {name: e}\nspec: {type: ExternalName}\n", []string{"externalName"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("f.yaml", []byte(c.data))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestDiffSendsOnlyChanges(t *testing.T) {
	a := &Snapshot{objects: map[model.Key]any{
		{Kind: model.KindNamespace, Name: "a"}: &model.Namespace{Name: "a"},
		{Kind: model.KindNamespace, Name: "b"}: &model.Namespace{Name: "b"},
	}}
	b := &Snapshot{objects: map[model.Key]any{
		{Kind: model.KindNamespace, Name: "a"}: &model.Namespace{Name: "a"},
		{Kind: model.KindNamespace, Name: "c"}: &model.Namespace{Name: "c"},
	}}
	changes := b.Diff(a)
	if len(changes) != 2 || changes[0].Key.Name != "c" || changes[0].Object == nil ||
		changes[1].Key.Name != "b" || changes[1].Object != nil {
		t.Fatalf("diff = %+v, want upsert c and delete b", changes)
	}
}

func TestParseServiceEntry(t *testing.T) {
	data := `
apiVersion: networking.istio.io/v1alpha3
kind: ServiceEntry
metadata: {name: ext}
spec:
  hosts: ["*.test.global", "db.example.com"]
  addresses: [127.255.0.2]
`
	objs, err := Parse("se.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	e, ok := objs[model.Key{Kind: model.KindServiceEntry, Namespace: "default", Name: "ext"}].(*model.ServiceEntry)
	if !ok || len(e.Hosts) != 2 || len(e.Addresses) != 1 {
		t.Fatalf("got %+v", objs)
	}
	if _, err := Parse("bad.yaml", []byte("apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: x}\nspec: {hosts: [\"a.b\"], addresses: [not-an-ip]}\n")); err == nil ||
		!strings.Contains(err.Error(), "bad.yaml") {
		t.Fatalf("broken ServiceEntry: %v", err)
	}
}
