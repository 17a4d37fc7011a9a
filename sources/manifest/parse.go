// Package manifest is the YAML file source: it serves Kubernetes manifests
// (Namespace, Service, EndpointSlice, Pod, and Istio ServiceEntry) as if
// they were a cluster, and re-reads them when they change. Conversion goes
// through sources/kubeobj and sources/istio, the same code the API sources
// use.
package manifest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/sources/kubeobj"
)

// typeMeta is enough of an object to decide how to decode it.
type typeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Items []map[string]any `json:"items"`
}

// Parse decodes every YAML document of one file into model objects, keyed
// by object key. Kinds that DNS does not use are skipped. The error names
// the file, the document and the object.
func Parse(file string, data []byte) (map[model.Key]any, error) {
	out := map[model.Key]any{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, doc, err)
		}
		if err := decodeDocument(raw, out); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, doc, err)
		}
	}
	return out, nil
}

func decodeDocument(raw []byte, out map[model.Key]any) error {
	var tm typeMeta
	if err := yaml.Unmarshal(raw, &tm); err != nil {
		return err
	}
	if tm.Kind == "" && tm.APIVersion == "" {
		return nil // empty document or comments only
	}
	if tm.Kind == "List" {
		for i, item := range tm.Items {
			b, err := yaml.Marshal(item)
			if err != nil {
				return fmt.Errorf("items[%d]: %w", i, err)
			}
			if err := decodeDocument(b, out); err != nil {
				return fmt.Errorf("items[%d]: %w", i, err)
			}
		}
		return nil
	}
	obj, err := decodeObject(tm, raw)
	if err != nil {
		return fmt.Errorf("%s %q: %w", tm.Kind, tm.Metadata.Name, err)
	}
	if obj == nil {
		return nil
	}
	key := keyOf(obj)
	if _, dup := out[key]; dup {
		return fmt.Errorf("%s is defined twice", key)
	}
	out[key] = obj
	return nil
}

// decodeObject decodes the kinds DNS uses and converts them. Other kinds
// return nil, so a file of ordinary manifests can be served as it is.
func decodeObject(tm typeMeta, raw []byte) (any, error) {
	switch {
	case tm.APIVersion == "v1" && tm.Kind == "Namespace":
		var n corev1.Namespace
		if err := yaml.Unmarshal(raw, &n); err != nil {
			return nil, err
		}
		return kubeobj.Namespace(&n)
	case tm.APIVersion == "v1" && tm.Kind == "Service":
		var s corev1.Service
		if err := yaml.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		defaultNamespace(&s.ObjectMeta.Namespace)
		return kubeobj.Service(&s)
	case tm.APIVersion == "discovery.k8s.io/v1" && tm.Kind == "EndpointSlice":
		var e discoveryv1.EndpointSlice
		if err := yaml.Unmarshal(raw, &e); err != nil {
			return nil, err
		}
		defaultNamespace(&e.ObjectMeta.Namespace)
		m, err := kubeobj.EndpointSlice(&e)
		if m == nil || err != nil {
			return nil, err
		}
		return m, nil
	case tm.APIVersion == "v1" && tm.Kind == "Pod":
		var p corev1.Pod
		if err := yaml.Unmarshal(raw, &p); err != nil {
			return nil, err
		}
		defaultNamespace(&p.ObjectMeta.Namespace)
		return kubeobj.Pod(&p)
	case strings.HasPrefix(tm.APIVersion, "networking.istio.io/") && tm.Kind == "ServiceEntry":
		var obj map[string]any
		if err := yaml.Unmarshal(raw, &obj); err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetNamespace() == "" {
			u.SetNamespace("default")
		}
		e, _, err := kubeobj.ServiceEntry(u)
		return e, err
	case tm.Kind == "":
		return nil, fmt.Errorf("kind is missing")
	case tm.APIVersion == "":
		return nil, fmt.Errorf("apiVersion is missing")
	}
	return nil, nil
}

// defaultNamespace applies kubectl's default for objects without one.
func defaultNamespace(ns *string) {
	if *ns == "" {
		*ns = "default"
	}
}

func keyOf(obj any) model.Key {
	switch o := obj.(type) {
	case *model.Namespace:
		return o.Key()
	case *model.Service:
		return o.Key()
	case *model.EndpointSlice:
		return o.Key()
	case *model.Pod:
		return o.Key()
	case *model.ServiceEntry:
		return o.Key()
	}
	panic(fmt.Sprintf("manifest: unexpected object %T", obj))
}

// withImpliedNamespaces adds a Namespace for every namespace that objects
// use but no document declares: in a cluster it would exist.
func withImpliedNamespaces(objs map[model.Key]any) {
	for key := range objs {
		if key.Namespace == "" {
			continue
		}
		nk := model.Key{Kind: model.KindNamespace, Name: key.Namespace}
		if _, ok := objs[nk]; !ok {
			objs[nk] = &model.Namespace{Name: key.Namespace}
		}
	}
}

// sortedKeys orders keys for deterministic batches and logs.
func sortedKeys(m map[model.Key]any) []model.Key {
	keys := make([]model.Key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Kind != keys[j].Kind {
			return keys[i].Kind < keys[j].Kind
		}
		return keys[i].String() < keys[j].String()
	})
	return keys
}
