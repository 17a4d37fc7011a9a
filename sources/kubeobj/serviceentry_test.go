package kubeobj

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/shardns/shardns/model"
)

func object(t testing.TB, text string) *unstructured.Unstructured {
	t.Helper()
	obj := map[string]any{}
	if err := yaml.Unmarshal([]byte(text), &obj); err != nil {
		t.Fatalf("bad test object: %v", err)
	}
	return &unstructured.Unstructured{Object: obj}
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

const head = "apiVersion: networking.istio.io/v1\nkind: ServiceEntry\nmetadata: {name: se, namespace: ns, resourceVersion: \"7\"}\n"

func TestServiceEntry(t *testing.T) {
	cases := []struct {
		name     string
		yaml     string
		want     *model.ServiceEntry
		warnings []string // substrings, in order
	}{
		{name: "the test.global example",
			yaml: head + "spec: {hosts: ['*.test.global'], addresses: [127.255.0.2]}",
			want: &model.ServiceEntry{Hosts: []string{"*.test.global"}, Addresses: addrs("127.255.0.2")}},
		{name: "hosts are lower-cased, without the trailing dot",
			yaml: head + "spec: {hosts: [DB.Example.COM., short], addresses: ['fd00::1', 10.0.0.1]}",
			want: &model.ServiceEntry{Hosts: []string{"db.example.com", "short"}, Addresses: addrs("fd00::1", "10.0.0.1")}},
		{name: "single-address CIDRs count, ranges are skipped",
			yaml:     head + "spec: {hosts: [a.b], addresses: [10.0.0.1/32, 'fd00::2/128', 10.1.0.0/24, '::ffff:10.0.0.3']}",
			want:     &model.ServiceEntry{Hosts: []string{"a.b"}, Addresses: addrs("10.0.0.1", "fd00::2", "10.0.0.3")},
			warnings: []string{"spec.addresses[2]: 10.1.0.0/24 is a range"}},
		{name: "exportTo is kept",
			yaml: head + "spec: {hosts: [a.b], addresses: [10.0.0.1], exportTo: ['.', other]}",
			want: &model.ServiceEntry{Hosts: []string{"a.b"}, Addresses: addrs("10.0.0.1"), ExportTo: []string{".", "other"}}},
		{name: "allocated addresses when spec.addresses is empty",
			yaml: head + `spec: {hosts: [a.example, b.example]}
status:
  addresses:
  - {value: 240.240.0.1, host: a.example}
  - {value: "2001:2::1", host: A.Example}
  - {value: 240.240.0.2/32, host: b.example}
  - {value: 240.240.0.0/16, host: b.example}
  - {value: 240.240.0.3}
  - nonsense
`,
			want: &model.ServiceEntry{Hosts: []string{"a.example", "b.example"}, StatusAddresses: map[string][]netip.Addr{
				"a.example": addrs("240.240.0.1", "2001:2::1"), "b.example": addrs("240.240.0.2")}},
			warnings: []string{"status.addresses[3]", "status.addresses[4]", "status.addresses[5]"}},
		{name: "allocated addresses are not used next to spec.addresses",
			yaml:     head + "spec: {hosts: [a.b], addresses: [10.0.0.0/8]}\nstatus: {addresses: [{value: 240.240.0.1, host: a.b}]}",
			want:     &model.ServiceEntry{Hosts: []string{"a.b"}},
			warnings: []string{"spec.addresses[0]"}},
		{name: "a broken status is ignored",
			yaml:     head + "spec: {hosts: [a.b]}\nstatus: {addresses: 5}",
			want:     &model.ServiceEntry{Hosts: []string{"a.b"}},
			warnings: []string{"status.addresses: want a list"}},
		{name: "no addresses at all",
			yaml: head + "spec: {hosts: [a.b], resolution: DNS, ports: [{number: 443, name: https, protocol: TLS}]}",
			want: &model.ServiceEntry{Hosts: []string{"a.b"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, warnings, err := ServiceEntry(object(t, c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			c.want.Namespace, c.want.Name, c.want.ResourceVersion = "ns", "se", "7"
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("got  %+v\nwant %+v", got, c.want)
			}
			if len(warnings) != len(c.warnings) {
				t.Fatalf("warnings %q, want %d", warnings, len(c.warnings))
			}
			for i, w := range c.warnings {
				if !strings.Contains(warnings[i], w) {
					t.Errorf("warning %q does not mention %q", warnings[i], w)
				}
			}
		})
	}
}

// A broken entry is an error naming the field, never a panic or half an
// entry.
func TestServiceEntryBroken(t *testing.T) {
	cases := []struct{ name, yaml, err string }{
		{"no name", "metadata: {namespace: ns}\nspec: {hosts: [a.b]}", "metadata.name"},
		{"no spec", head, "spec.hosts is empty"},
		{"no hosts", head + "spec: {addresses: [10.0.0.1]}", "spec.hosts is empty"},
		{"spec is a string", head + "spec: hosts", "spec: want an object, got a string"},
		{"hosts is a string", head + "spec: {hosts: a.b}", "spec.hosts: want a list of strings, got a string"},
		{"host is a number", head + "spec: {hosts: [a.b, 5]}", "spec.hosts[1]: want a string, got a number"},
		{"host is not a name", head + "spec: {hosts: ['a b.c']}", `spec.hosts[0]: "a b.c" is not a domain name`},
		{"bare wildcard", head + "spec: {hosts: ['*']}", `spec.hosts[0]: "*"`},
		{"inner wildcard", head + "spec: {hosts: ['a.*.b']}", `spec.hosts[0]: "a.*.b"`},
		{"empty label", head + "spec: {hosts: ['a..b']}", `spec.hosts[0]`},
		{"address is not an IP", head + "spec: {hosts: [a.b], addresses: [10.0.0.1, nope]}", `spec.addresses[1]: "nope" is not an IP`},
		{"address with a zone", head + "spec: {hosts: [a.b], addresses: ['fe80::1%eth0']}", `spec.addresses[0]`},
		{"addresses is an object", head + "spec: {hosts: [a.b], addresses: {a: 1}}", "spec.addresses: want a list of strings, got an object"},
		{"exportTo is a number", head + "spec: {hosts: [a.b], exportTo: 1}", "spec.exportTo"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _, err := ServiceEntry(object(t, c.yaml))
			if err == nil {
				t.Fatalf("accepted: %+v", got)
			}
			if got != nil {
				t.Errorf("returned %+v with the error", got)
			}
			if !strings.Contains(err.Error(), c.err) {
				t.Errorf("error %q does not mention %q", err, c.err)
			}
		})
	}
}

// What StripServiceEntry keeps converts as the whole object does.
func TestStripKeepsWhatDNSReads(t *testing.T) {
	u := object(t, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: se
  namespace: ns
  resourceVersion: "7"
  annotations: {big: "x"}
  managedFields: [{manager: kubectl}]
spec:
  hosts: [a.b]
  exportTo: ["*"]
  ports: [{number: 80, name: http, protocol: HTTP}]
  endpoints: [{address: 1.2.3.4}]
status:
  addresses: [{value: 240.240.0.1, host: a.b}]
  conditions: [{type: Reconciled}]
`)
	s, err := StripServiceEntry(u)
	if err != nil {
		t.Fatal(err)
	}
	su := s.(*unstructured.Unstructured)
	if _, ok := su.Object["spec"].(map[string]any)["ports"]; ok || su.GetAnnotations() != nil || su.GetManagedFields() != nil {
		t.Errorf("StripServiceEntry kept fields DNS does not read: %v", su.Object)
	}
	want, _, _ := ServiceEntry(u)
	got, _, err := ServiceEntry(su)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("stripped converts to %+v, %v; want %+v", got, err, want)
	}
	// A broken spec stays broken.
	b, _ := StripServiceEntry(object(t, head+"spec: [1]"))
	if _, _, err := ServiceEntry(b.(*unstructured.Unstructured)); err == nil {
		t.Error("a broken spec converts after StripServiceEntry")
	}
}

func FuzzServiceEntry(f *testing.F) {
	f.Add(head + "spec: {hosts: ['*.test.global'], addresses: [127.255.0.2]}")
	f.Add(head + "spec: {hosts: [a.b]}\nstatus: {addresses: [{value: 240.240.0.1, host: a.b}]}")
	f.Add(head + "spec: {hosts: [a.b], addresses: [10.0.0.0/8, 'fd00::1/128'], exportTo: ['.']}")
	f.Fuzz(func(t *testing.T, text string) {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(text), &obj); err != nil {
			return
		}
		u := &unstructured.Unstructured{Object: obj}
		e, _, err := ServiceEntry(u)
		if err != nil {
			return
		}
		for _, h := range e.Hosts {
			if !validHost(h) {
				t.Fatalf("invalid host %q accepted", h)
			}
		}
		s, _ := StripServiceEntry(u)
		again, _, err := ServiceEntry(s.(*unstructured.Unstructured))
		if err != nil || !reflect.DeepEqual(again, e) {
			t.Fatalf("StripServiceEntry changed the entry: %+v, %v; want %+v", again, err, e)
		}
	})
}
