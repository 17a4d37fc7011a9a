// Package multicluster is the Multi-Cluster Services API source: it
// watches multicluster.x-k8s.io ServiceImports and the EndpointSlices an
// MCS implementation imports (labelled
// multicluster.kubernetes.io/service-name) through client-go's dynamic
// client, as the Istio source watches ServiceEntries, converts them to
// model.ServiceImport and model.MultiClusterSlice and sends the changes
// to the zone manager, which answers them under the multicluster zones
// (zone/multicluster.go).
//
// A cluster without the ServiceImport resource is not an error: the
// source says so once, reports itself synced with nothing to answer, and
// checks again now and then, so installing an MCS implementation later
// needs no restart.
//
// Once ServiceImports are served, the Kubernetes source watches the two
// kinds for this one (sources.WatchKinds): a namespace's MCS objects
// build that namespace's zone, so they follow the ring exactly as its
// Services do, sharded watches included, from the same detection,
// reshard, replay and widening. This source discovers, converts and says
// when they have listed.
package multicluster

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/sources"
	"github.com/shardns/shardns/sources/crdsource"
	"github.com/shardns/shardns/sources/kubeclient"
	"github.com/shardns/shardns/sources/kubeobj"
)

// SourceName identifies this source in zone batches and logs.
const SourceName = "multicluster"

// ServiceImports and EndpointSlices, as the dynamic client names them.
var (
	ServiceImports = schema.GroupVersionResource{Group: kubeobj.MultiClusterGroup,
		Version: kubeobj.MultiClusterVersion, Resource: kubeobj.ServiceImportResource}
	EndpointSlices = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}
)

// Config configures the source.
type Config struct {
	Client    dynamic.Interface
	Discovery kubeclient.Discovery // lists what a group version serves
	Manager   *actor.PID           // receives the changes and Synced
	// Kubernetes is the Kubernetes source, which watches the objects.
	Kubernetes *actor.PID
	// Namespaces are kubernetes.namespaces: empty serves every namespace.
	Namespaces []string
	// LabelSelector is kubernetes.labelSelector, applied to the imported
	// slices as to a cluster's own (CoreDNS does the same).
	LabelSelector string
	Logger        *slog.Logger
	// Retry is the longest wait between discovery attempts while the API
	// server cannot be reached (doubling from a second). Default 30 s.
	Retry time.Duration
	// Recheck is how often discovery is repeated while the API server
	// serves no ServiceImports. Default one minute.
	Recheck time.Duration
}

// NewProps returns the props of the source: a crdsource.Source that,
// once ServiceImports are served, has the Kubernetes source watch them
// and the imported slices (Kinds).
func NewProps(cfg Config) *actor.Props {
	return crdsource.NewProps(crdsource.Config{
		Name: SourceName, Manager: cfg.Manager, Logger: cfg.Logger, Retry: cfg.Retry, Recheck: cfg.Recheck,
		Find: func() (schema.GroupVersionResource, error) { return ServiceImports, Served(cfg.Discovery) },
		Logs: crdsource.Logs{
			Missing:  "kubernetes.multicluster is set, but there is no ServiceImport to watch; serving the rest and checking again later",
			Failed:   "ServiceImport discovery failed; retrying",
			Watching: "watching ServiceImports and imported EndpointSlices",
			Listed:   "ServiceImport initial list done",
		},
		Handoff: func(ctx actor.Context, _ schema.GroupVersionResource, listed func()) {
			kinds, err := Kinds(cfg)
			if err != nil {
				// kubernetes.labelSelector was validated at start: only a bug gets here.
				panic(fmt.Sprintf("multicluster source: %v", err))
			}
			ctx.Send(cfg.Kubernetes, &sources.WatchKinds{Kinds: kinds, Listed: listed})
		},
	})
}

// errNotServed: the API server has no ServiceImport resource.
var errNotServed = fmt.Errorf("multicluster.x-k8s.io/v1alpha1 ServiceImports (the Multi-Cluster Services API's CRDs are not installed): %w", kubeclient.ErrNotServed)

// Served reports whether the API server serves ServiceImports: an error
// wrapping errNotServed when it does not, another when it cannot say.
func Served(d kubeclient.Discovery) error {
	gv := ServiceImports.GroupVersion().String()
	list, err := d.ServerResourcesForGroupVersion(gv)
	switch {
	case apierrors.IsNotFound(err):
		return errNotServed
	case err != nil:
		return fmt.Errorf("discovering %s: %w", gv, err)
	}
	for _, r := range list.APIResources {
		if r.Name == ServiceImports.Resource {
			return nil
		}
	}
	return errNotServed
}

// Kinds are ServiceImports and imported slices as the Kubernetes source
// watches them: converted on the way into its caches, sent as this
// source's model objects, of the namespaces kubernetes.namespaces exposes.
func Kinds(cfg Config) ([]sources.Kind, error) {
	sliceSelector, err := importedSliceSelector(cfg.LabelSelector)
	if err != nil {
		return nil, err
	}
	exposed := exposedFunc(cfg.Namespaces)
	kind := func(k model.Kind, gvr schema.GroupVersionResource, labelSelector string) sources.Kind {
		return sources.Kind{Kind: k, ListWatch: listWatch(cfg.Client, gvr, labelSelector),
			Object:    func() runtime.Object { return &unstructured.Unstructured{} },
			Transform: transformFor(k, cfg.Logger),
			Handler: func(send func(model.Change)) cache.ResourceEventHandler {
				return &handler{kind: k, exposed: exposed, send: send, log: cfg.Logger}
			}}
	}
	return []sources.Kind{
		kind(model.KindServiceImport, ServiceImports, ""),
		kind(model.KindMultiClusterSlice, EndpointSlices, sliceSelector),
	}, nil
}

// listWatch lists and watches gvr in every namespace, restricted to
// labelSelector, with the watching source's options (its shard selector).
func listWatch(client dynamic.Interface, gvr schema.GroupVersionResource, labelSelector string) func(func(*metav1.ListOptions)) cache.ListerWatcher {
	return func(tweak func(*metav1.ListOptions)) cache.ListerWatcher {
		resource := client.Resource(gvr)
		set := func(o *metav1.ListOptions) {
			tweak(o)
			o.LabelSelector = labelSelector
		}
		return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				set(&o)
				return resource.List(ctx, o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				set(&o)
				return resource.Watch(ctx, o)
			},
		}, client)
	}
}

// importedSliceSelector selects the slices labelled with the service they
// were imported for, and kubernetes.labelSelector's.
func importedSliceSelector(labelSelector string) (string, error) {
	sel, err := labels.Parse(labelSelector)
	if err != nil {
		return "", fmt.Errorf("kubernetes.labelSelector: %w", err)
	}
	req, err := labels.NewRequirement(kubeobj.MultiClusterServiceLabel, selection.Exists, nil)
	if err != nil {
		return "", err
	}
	return sel.Add(*req).String(), nil
}

// exposedFunc implements kubernetes.namespaces.
func exposedFunc(namespaces []string) func(string) bool {
	if len(namespaces) == 0 {
		return func(string) bool { return true }
	}
	set := make(map[string]bool, len(namespaces))
	for _, n := range namespaces {
		set[n] = true
	}
	return func(ns string) bool { return set[ns] }
}
