package kubeobj

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/shardns/shardns/model"
)

// ServiceEntry converts a networking.istio.io ServiceEntry, served as
// unstructured JSON. A broken object (a field of the wrong type, a host
// that is not a domain name, an address that is not an IP) is an error
// naming the field, so nothing of it is served. Parts that are valid for
// Istio but give no DNS record (a CIDR wider than one address, a status
// entry without a host) are skipped and described in warnings.
func ServiceEntry(u *unstructured.Unstructured) (*model.ServiceEntry, []string, error) {
	e := &model.ServiceEntry{Namespace: u.GetNamespace(), Name: u.GetName(), ResourceVersion: u.GetResourceVersion()}
	if e.Name == "" {
		return nil, nil, fmt.Errorf("ServiceEntry: metadata.name is empty")
	}
	where := "ServiceEntry " + e.Namespace + "/" + e.Name
	fail := func(err error) (*model.ServiceEntry, []string, error) {
		return nil, nil, fmt.Errorf("%s: %w", where, err)
	}
	hosts, err := stringList(u.Object, "spec", "hosts")
	if err != nil {
		return fail(err)
	}
	if len(hosts) == 0 {
		return fail(fmt.Errorf("spec.hosts is empty"))
	}
	for i, h := range hosts {
		h = strings.TrimSuffix(strings.ToLower(h), ".")
		if !validHost(h) {
			return fail(fmt.Errorf("spec.hosts[%d]: %q is not a domain name or a *. wildcard", i, hosts[i]))
		}
		e.Hosts = append(e.Hosts, h)
	}
	if e.ExportTo, err = stringList(u.Object, "spec", "exportTo"); err != nil {
		return fail(err)
	}
	addrs, err := stringList(u.Object, "spec", "addresses")
	if err != nil {
		return fail(err)
	}
	var warnings []string
	for i, s := range addrs {
		a, single, err := parseAddress(s)
		switch {
		case err != nil:
			return fail(fmt.Errorf("spec.addresses[%d]: %w", i, err))
		case !single:
			warnings = append(warnings, fmt.Sprintf("%s: spec.addresses[%d]: %s is a range, not one address: skipped", where, i, s))
		default:
			e.Addresses = append(e.Addresses, a)
		}
	}
	if len(addrs) == 0 {
		// Istio allocates addresses only to entries that declare none.
		e.StatusAddresses, warnings = statusAddresses(u.Object, where, warnings)
	}
	return e, warnings, nil
}

// statusAddresses reads status.addresses, Istio's allocated addresses
// (1.23 and later: a list of {value, host}). It is written by Istio, not by
// the user, so what does not parse is skipped with a warning rather than
// failing the entry.
func statusAddresses(obj map[string]any, where string, warnings []string) (map[string][]netip.Addr, []string) {
	v, err := field(obj, "status", "addresses")
	if err != nil {
		return nil, append(warnings, fmt.Sprintf("%s: %v: ignored", where, err))
	}
	if v == nil {
		return nil, warnings
	}
	list, ok := v.([]any)
	if !ok {
		return nil, append(warnings, fmt.Sprintf("%s: status.addresses: want a list, got %s: ignored", where, typeName(v)))
	}
	out := map[string][]netip.Addr{}
	for i, item := range list {
		m, _ := item.(map[string]any)
		value, _ := m["value"].(string)
		host, _ := m["host"].(string)
		if value == "" || host == "" {
			warnings = append(warnings, fmt.Sprintf("%s: status.addresses[%d]: want a value and a host: skipped", where, i))
			continue
		}
		a, single, err := parseAddress(value)
		if err != nil || !single {
			warnings = append(warnings, fmt.Sprintf("%s: status.addresses[%d]: %q is not one address: skipped", where, i, value))
			continue
		}
		host = strings.TrimSuffix(strings.ToLower(host), ".")
		out[host] = append(out[host], a)
	}
	if len(out) == 0 {
		return nil, warnings
	}
	return out, warnings
}

// parseAddress parses an IP or a CIDR; single is false for a CIDR that
// covers more than one address (/32 and /128 count as one).
func parseAddress(s string) (a netip.Addr, single bool, err error) {
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return a.Unmap(), true, nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Addr{}, false, fmt.Errorf("%q is not an IP address or CIDR", s)
	}
	a = p.Addr().Unmap()
	return a, p.IsSingleIP(), nil
}

// validHost accepts lower-case domain names of letters, digits, hyphens
// and underscores, optionally behind a leading "*." label.
func validHost(h string) bool {
	h = strings.TrimPrefix(h, "*.")
	if h == "" || len(h) > 253 {
		return false
	}
	for _, l := range strings.Split(h, ".") {
		if l == "" || len(l) > 63 {
			return false
		}
		for _, c := range l {
			if !(c == '-' || c == '_' || ('a' <= c && c <= 'z') || ('0' <= c && c <= '9')) {
				return false
			}
		}
	}
	return true
}

// stringList reads an optional list of strings at path.
func stringList(obj map[string]any, path ...string) ([]string, error) {
	v, err := field(obj, path...)
	if err != nil || v == nil {
		return nil, err
	}
	name := strings.Join(path, ".")
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: want a list of strings, got %s", name, typeName(v))
	}
	out := make([]string, len(list))
	for i, x := range list {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("%s[%d]: want a string, got %s", name, i, typeName(x))
		}
		out[i] = s
	}
	return out, nil
}

// field returns the value at path, nil when a part of it is missing, and
// an error when a part is not an object.
func field(obj map[string]any, path ...string) (any, error) {
	var v any = obj
	for i, p := range path {
		if v == nil {
			return nil, nil
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: want an object, got %s", strings.Join(path[:i], "."), typeName(v))
		}
		v = m[p]
	}
	return v, nil
}

// typeName names a JSON value's type for error messages.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
