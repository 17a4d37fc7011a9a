package corefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"

	"github.com/shardns/shardns/config"
)

// KubeDNSOptions changes the Corefile KubeDNSCorefile writes.
type KubeDNSOptions struct {
	// ClusterDomain is the cluster's DNS domain, kubelet's
	// --cluster-domain; empty means cluster.local.
	ClusterDomain string
	// Port is the port the Corefile's server blocks listen on; 0 means
	// 53. (kube-dns itself listened on 10053 behind dnsmasq.)
	Port int
}

// The data keys of the kube-dns ConfigMap, each a JSON document.
const (
	kubeDNSStubDomains = "stubDomains"         // {"DOMAIN": ["IP[:PORT]", ...]}
	kubeDNSUpstreams   = "upstreamNameservers" // ["IP[:PORT]", ...]
	kubeDNSFederations = "federations"         // {"NAME": "DOMAIN"}
)

// KubeDNSCorefile translates the kube-dns ConfigMap (kube-system/kube-dns)
// to the Corefile CoreDNS would run in its place, for Parse and Convert
// to turn into a shardns configuration, so clusters still on kube-dns
// (or configured as GKE's are) can move to shardns too.
//
// data is the ConfigMap as a manifest (kind: ConfigMap, as `kubectl get
// configmap kube-dns -o yaml` prints it) or only its data, in YAML or
// JSON; "{}" is a ConfigMap without data. A key's value is the JSON
// document kube-dns reads, as a string or written in place. The
// Corefile is kubeadm's default server block for the root zone, its
// forward sending to upstreamNameservers when given (else to
// /etc/resolv.conf), with a federation plugin for the federations, and
// one server block per stub domain, in order of name, as Kubernetes'
// kube-dns to CoreDNS migration writes them.
//
// A key that is not JSON of the expected shape, a stub domain or
// federation domain that is not a domain name, a nameserver that is not
// an IP or IP:port, and a data key kube-dns does not read are errors
// naming the key and the value: a key kube-dns ignores is more likely a
// typo or the wrong ConfigMap (CoreDNS's Corefile) than something to
// drop quietly.
func KubeDNSCorefile(data []byte, opts KubeDNSOptions) ([]byte, error) {
	domain, err := kubeDNSClusterDomain(opts.ClusterDomain)
	if err != nil {
		return nil, err
	}
	fields, err := kubeDNSData(data)
	if err != nil {
		return nil, err
	}
	k, err := readKubeDNS(fields)
	if err != nil {
		return nil, err
	}
	k.Domain = domain
	k.Port = 53
	if opts.Port != 0 {
		if opts.Port < 0 || opts.Port > 65535 {
			return nil, fmt.Errorf("port %d is not a port number", opts.Port)
		}
		k.Port = opts.Port
	}
	var out bytes.Buffer
	if err := kubeDNSTemplate.Execute(&out, k); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func kubeDNSClusterDomain(d string) (string, error) {
	if d == "" {
		return "cluster.local", nil
	}
	z, err := NormalizeZone(d)
	if err != nil || z == "." || !config.ValidDomain(z) {
		return "", fmt.Errorf("cluster domain %q is not a domain name", d)
	}
	return z, nil
}

// kubeDNSData returns the data keys of a ConfigMap manifest, or of the
// bare data map. A manifest is told apart by kind or apiVersion, keys
// that the data of kube-dns's ConfigMap never has.
func kubeDNSData(src []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(src)) == 0 {
		// An empty pipe is more likely a failed kubectl than a ConfigMap.
		return nil, errors.New("no kube-dns ConfigMap: the input is empty ({} is a ConfigMap without data)")
	}
	var top map[string]any
	if err := yaml.Unmarshal(src, &top); err != nil {
		return nil, fmt.Errorf("the kube-dns ConfigMap is not a YAML or JSON object: %w", err)
	}
	_, hasKind := top["kind"]
	_, hasAPI := top["apiVersion"]
	if !hasKind && !hasAPI {
		return top, nil
	}
	if top["kind"] != "ConfigMap" {
		return nil, fmt.Errorf("kind %v: want the kube-dns ConfigMap or its data", top["kind"])
	}
	switch d := top["data"].(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return d, nil
	}
	return nil, errors.New("the ConfigMap's data is not an object")
}

// kubeDNS is the validated content of the ConfigMap, in the order the
// Corefile lists it.
type kubeDNS struct {
	Domain      string
	Port        int
	Upstreams   []string
	Stubs       []kubeDNSStub
	Federations []kubeDNSFederation
}

type kubeDNSStub struct {
	Zone        string
	Nameservers []string
}

type kubeDNSFederation struct{ Name, Domain string }

// readKubeDNS decodes and checks each data key.
func readKubeDNS(fields map[string]any) (*kubeDNS, error) {
	k := &kubeDNS{Upstreams: []string{"/etc/resolv.conf"}}
	for _, key := range kubeDNSSortedKeys(fields) {
		var err error
		switch key {
		case kubeDNSStubDomains:
			err = k.readStubs(fields[key])
		case kubeDNSUpstreams:
			err = k.readUpstreams(fields[key])
		case kubeDNSFederations:
			err = k.readFederations(fields[key])
		default:
			err = fmt.Errorf("unknown key %q in the kube-dns ConfigMap: kube-dns reads only %s, %s and %s",
				key, kubeDNSStubDomains, kubeDNSUpstreams, kubeDNSFederations)
		}
		if err != nil {
			return nil, err
		}
	}
	return k, nil
}

// decodeKubeDNSKey decodes the JSON of a data key into v. It reports
// false for an empty value, taken as the key left out: it asks for
// nothing.
func decodeKubeDNSKey(key string, value any, v any, shape string) (bool, error) {
	var src []byte
	switch s := value.(type) {
	case string:
		src = []byte(strings.TrimSpace(s))
	case nil:
	default:
		// Written as YAML or JSON in place rather than as a string; what
		// yaml.Unmarshal decoded always encodes again.
		src, _ = json.Marshal(s)
	}
	if len(src) == 0 {
		return false, nil
	}
	if err := json.Unmarshal(src, v); err != nil {
		return false, fmt.Errorf("%s: malformed JSON, want %s: %v", key, shape, err)
	}
	return true, nil
}

func (k *kubeDNS) readStubs(value any) error {
	var stubs map[string][]string
	ok, err := decodeKubeDNSKey(kubeDNSStubDomains, value, &stubs, `an object of domain to nameservers ({"corp.example": ["10.0.0.53"]})`)
	if !ok {
		return err
	}
	seen := map[string]string{}
	for _, name := range kubeDNSSortedKeys(stubs) {
		zone, err := NormalizeZone(name)
		if err != nil || zone == "." || !config.ValidDomain(zone) {
			return fmt.Errorf("%s: %q is not a domain name", kubeDNSStubDomains, name)
		}
		if prev, dup := seen[zone]; dup {
			return fmt.Errorf("%s: %q and %q are the same domain", kubeDNSStubDomains, prev, name)
		}
		seen[zone] = name
		if len(stubs[name]) == 0 {
			return fmt.Errorf("%s: %q has no nameservers", kubeDNSStubDomains, name)
		}
		ns, err := kubeDNSNameservers(stubs[name])
		if err != nil {
			return fmt.Errorf("%s: %q: %w", kubeDNSStubDomains, name, err)
		}
		k.Stubs = append(k.Stubs, kubeDNSStub{Zone: zone, Nameservers: ns})
	}
	slices.SortFunc(k.Stubs, func(a, b kubeDNSStub) int { return strings.Compare(a.Zone, b.Zone) })
	return nil
}

func (k *kubeDNS) readUpstreams(value any) error {
	var ups []string
	ok, err := decodeKubeDNSKey(kubeDNSUpstreams, value, &ups, `a list of nameservers (["8.8.8.8", "8.8.4.4"])`)
	if !ok || len(ups) == 0 {
		// kube-dns uses the node's resolv.conf when none is given.
		return err
	}
	ns, err := kubeDNSNameservers(ups)
	if err != nil {
		return fmt.Errorf("%s: %w", kubeDNSUpstreams, err)
	}
	k.Upstreams = ns
	return nil
}

func (k *kubeDNS) readFederations(value any) error {
	var feds map[string]string
	ok, err := decodeKubeDNSKey(kubeDNSFederations, value, &feds, `an object of federation name to domain ({"myfed": "example.com"})`)
	if !ok {
		return err
	}
	for _, name := range kubeDNSSortedKeys(feds) {
		if !config.ValidLabel(name) {
			return fmt.Errorf("%s: name %q is not a DNS label", kubeDNSFederations, name)
		}
		d, err := NormalizeZone(feds[name])
		if err != nil || d == "." || !config.ValidDomain(d) {
			return fmt.Errorf("%s: %q: %q is not a domain name", kubeDNSFederations, name, feds[name])
		}
		k.Federations = append(k.Federations, kubeDNSFederation{Name: name, Domain: d})
	}
	return nil
}

// kubeDNSNameservers checks that each entry is an IP or IP:port, as
// kube-dns accepts, and writes it as CoreDNS's forward reads it.
func kubeDNSNameservers(in []string) ([]string, error) {
	out := make([]string, 0, len(in))
	for _, s := range in {
		if ap, err := netip.ParseAddrPort(s); err == nil && ap.Port() != 0 && ap.Addr().Zone() == "" {
			out = append(out, ap.String())
			continue
		}
		if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
			out = append(out, a.String())
			continue
		}
		return nil, fmt.Errorf("nameserver %q is not an IP or IP:port", s)
	}
	return out, nil
}

func kubeDNSSortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// kubeDNSTemplate is kubeadm's default Corefile, the upstreams in its
// forward, the federations after the kubernetes plugin they extend, and
// a block per stub domain shaped as the migration writes it.
var kubeDNSTemplate = template.Must(template.New("Corefile").Funcs(template.FuncMap{
	"join": func(s []string) string { return strings.Join(s, " ") },
}).Parse(`.:{{.Port}} {
    errors
    health {
        lameduck 5s
    }
    ready
    kubernetes {{.Domain}} in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
{{- if .Federations}}
    federation {{.Domain}} {
{{- range .Federations}}
        {{.Name}} {{.Domain}}
{{- end}}
    }
{{- end}}
    prometheus :9153
    forward . {{join .Upstreams}}
    cache 30
    loop
    reload
    loadbalance
}
{{- range .Stubs}}
{{.Zone}}:{{$.Port}} {
    errors
    cache 30
    loop
    forward . {{join .Nameservers}}
}
{{- end}}
`))
