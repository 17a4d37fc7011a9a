// Package istio is the Istio source: it watches networking.istio.io
// ServiceEntries through client-go's dynamic client (no Istio
// dependency), converts them to model.ServiceEntry and sends the changes
// to the zone manager, which answers their hosts from mesh zones (see
// zone.MeshHosts for what is answered).
//
// The version is picked through discovery: v1, else v1beta1, else
// v1alpha3, whichever the API server serves. A cluster without the
// ServiceEntry resource is not an error: the source reports itself
// synced with nothing to answer, and checks again now and then, so
// installing Istio later needs no restart.
package istio

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/sources/crdsource"
	"github.com/shardns/shardns/sources/kubeclient"
	"github.com/shardns/shardns/sources/kubeobj"
)

// SourceName identifies this source in zone batches and logs.
const SourceName = "istio"

// Group and Resource of ServiceEntries; Versions in order of preference.
const (
	Group    = "networking.istio.io"
	Resource = "serviceentries"
)

// Versions are the ServiceEntry versions the source reads, best first.
var Versions = []string{"v1", "v1beta1", "v1alpha3"}

// Config configures the Istio source.
type Config struct {
	Client    dynamic.Interface
	Discovery kubeclient.Discovery
	Manager   *actor.PID // receives the changes
	Logger    *slog.Logger
	// Retry is the longest wait between discovery attempts while the API
	// server cannot be reached (doubling from a second). Default 30 s.
	Retry time.Duration
	// Recheck is how often discovery is repeated while the API server does
	// not serve ServiceEntries. Default one minute.
	Recheck time.Duration
}

// NewProps returns the props of the source: a crdsource.Source watching
// the ServiceEntry version Pick finds through an informer of its own.
func NewProps(cfg Config) *actor.Props {
	return crdsource.NewProps(crdsource.Config{
		Name: SourceName, Manager: cfg.Manager, Logger: cfg.Logger, Retry: cfg.Retry, Recheck: cfg.Recheck,
		Find: func() (schema.GroupVersionResource, error) { return Pick(cfg.Discovery) },
		Logs: crdsource.Logs{
			Missing:     "istio.enabled, but no ServiceEntry to watch; checking again later",
			Failed:      "Istio discovery failed; retrying",
			Watching:    "watching Istio ServiceEntries",
			WatchFailed: "ServiceEntry watch failed; serving the last known state and retrying",
			Listed:      "ServiceEntry initial list done",
		},
		Informer: &crdsource.Informer{Client: cfg.Client, Transform: kubeobj.StripServiceEntry,
			Handler: func(send func(model.Change), replay bool) cache.ResourceEventHandler {
				return &handler{send: send, log: cfg.Logger, quiet: replay}
			}},
	})
}

// errNotServed: the API server has no ServiceEntry resource.
var errNotServed = fmt.Errorf("networking.istio.io ServiceEntries (Istio's CRDs are not installed): %w", kubeclient.ErrNotServed)

// Pick returns the preferred ServiceEntry version the API server serves.
func Pick(d kubeclient.Discovery) (schema.GroupVersionResource, error) {
	for _, v := range Versions {
		gv := schema.GroupVersion{Group: Group, Version: v}
		list, err := d.ServerResourcesForGroupVersion(gv.String())
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return schema.GroupVersionResource{}, fmt.Errorf("discovering %s: %w", gv, err)
		}
		for _, r := range list.APIResources {
			if r.Name == Resource {
				return gv.WithResource(Resource), nil
			}
		}
	}
	return schema.GroupVersionResource{}, errNotServed
}
