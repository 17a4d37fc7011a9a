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
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/shardns/shardns/actors/zones"
	"github.com/shardns/shardns/model"
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

// Source is the actor owning the discovery loop and the informer. Their
// goroutines stop, and are waited for, when the actor stops.
type Source struct {
	cfg      Config
	stop     chan struct{}
	informer cache.SharedIndexInformer // nil until discovery found the resource
	wg       sync.WaitGroup
}

// discovered tells the source which resource to watch.
type discovered struct {
	gvr schema.GroupVersionResource
}

// NewProps returns the props of a Source.
func NewProps(cfg Config) *actor.Props {
	if cfg.Retry <= 0 {
		cfg.Retry = 30 * time.Second
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = time.Minute
	}
	return actor.PropsFromProducer(func() actor.Actor { return &Source{cfg: cfg} }, zones.BurstMailbox())
}

// Receive starts discovery, then the watch, and stops them.
func (s *Source) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.stop = make(chan struct{})
		root, self := ctx.ActorSystem().Root, ctx.Self()
		s.wg.Go(func() { s.discover(root, self) })
	case *discovered:
		s.watch(ctx, msg.gvr)
	case *zones.Replay:
		s.replay(ctx, msg.ID)
	case *actor.Stopping:
		s.shutdown()
	}
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

// discover finds the version to watch and tells the actor. While the API
// server is unreachable it retries with backoff; while it serves no
// ServiceEntries the source counts as synced (there is nothing to wait
// for) and discovery is repeated every Recheck.
func (s *Source) discover(root *actor.RootContext, self *actor.PID) {
	var gvr schema.GroupVersionResource
	found := kubeclient.WaitServed(s.stop, kubeclient.Waits{Retry: s.cfg.Retry, Recheck: s.cfg.Recheck},
		func() (err error) { gvr, err = Pick(s.cfg.Discovery); return err },
		func(err error) {
			s.cfg.Logger.Warn("istio.enabled, but no ServiceEntry to watch; checking again later", "err", err, "every", s.cfg.Recheck)
			root.Send(s.cfg.Manager, &zones.Synced{Source: SourceName, From: self})
		},
		func(err error, in time.Duration) {
			s.cfg.Logger.Warn("Istio discovery failed; retrying", "err", err, "in", in)
		})
	if found {
		s.cfg.Logger.Info("watching Istio ServiceEntries", "version", gvr.Version)
		root.Send(self, &discovered{gvr: gvr})
	}
}

// watch starts the informer of gvr and reports the source synced once it
// has listed.
func (s *Source) watch(ctx actor.Context, gvr schema.GroupVersionResource) {
	root, manager, self := ctx.ActorSystem().Root, s.cfg.Manager, ctx.Self()
	resource := s.cfg.Client.Resource(gvr)
	// As client-go's dynamic informer: the client says whether it can
	// stream the initial list (a fake cannot), else the reflector lists.
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return resource.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return resource.Watch(ctx, o)
		},
	}, s.cfg.Client)
	inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
	if err := inf.SetTransform(kubeobj.StripServiceEntry); err != nil {
		panic(fmt.Sprintf("istio source: setting the transform of a new informer: %v", err))
	}
	inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		s.cfg.Logger.Warn("ServiceEntry watch failed; serving the last known state and retrying", "err", err)
	})
	send := func(c model.Change) {
		root.Send(manager, &zones.Apply{Source: SourceName, Changes: []model.Change{c}})
	}
	reg, err := inf.AddEventHandler(&handler{send: send, log: s.cfg.Logger})
	if err != nil {
		panic(fmt.Sprintf("istio source: adding a handler to a new informer: %v", err))
	}
	s.informer = inf
	s.wg.Go(func() { inf.Run(s.stop) })
	s.wg.Go(func() {
		start := time.Now()
		if cache.WaitForCacheSync(s.stop, reg.HasSynced) {
			s.cfg.Logger.Info("ServiceEntry initial list done", "took", time.Since(start).Round(time.Millisecond))
			root.Send(manager, &zones.Synced{Source: SourceName, From: self})
		}
	})
}

// replay sends every entry the informer cache holds, so the zone manager
// can load zones this replica gained. It reads the local cache only.
func (s *Source) replay(ctx actor.Context, id uint64) {
	var changes []model.Change
	if s.informer != nil {
		h := &handler{log: s.cfg.Logger, quiet: true, send: func(c model.Change) { changes = append(changes, c) }}
		for _, obj := range s.informer.GetStore().List() {
			h.OnAdd(obj, true) // as the initial list: no change in the API, no trigger
		}
	}
	ctx.Send(s.cfg.Manager, &zones.Apply{Source: SourceName, Changes: changes, Replay: id})
	ctx.Send(s.cfg.Manager, &zones.ReplayDone{Source: SourceName, ID: id})
}

func (s *Source) shutdown() {
	if s.stop == nil {
		return
	}
	close(s.stop)
	s.wg.Wait()
}
