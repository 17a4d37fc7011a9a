// Package crdsource is the skeleton of a source fed by one custom
// resource: it waits until the API server serves the resource (a cluster
// without its CRD is not an error: the source counts as synced, there
// being nothing to wait for, and asks again now and then, so installing
// the CRD later needs no restart), then watches it, either through an
// informer of its own on the dynamic client (Informer) or by handing the
// watch elsewhere (Handoff: the Watcher source, for kinds that follow the
// ring), sends what the watch delivers to the zone manager and answers
// its replays. A source built on it keeps only its discovery and its
// conversion.
package crdsource

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/sources/kubeclient"
)

// Config configures a source of one custom resource.
type Config struct {
	// Name identifies the source in zone batches and Synced.
	Name    string
	Manager *actor.PID // receives the changes and Synced
	Logger  *slog.Logger
	// Find returns the resource to watch, an error wrapping
	// kubeclient.ErrNotServed while the API server does not serve it, or
	// another when it cannot say.
	Find func() (schema.GroupVersionResource, error)
	// Retry is the longest wait between discovery attempts while the API
	// server cannot be reached (doubling from a second). Default 30 s.
	Retry time.Duration
	// Recheck is how often discovery is repeated while the API server does
	// not serve the resource. Default one minute.
	Recheck time.Duration
	Logs    Logs
	// Informer watches the resource in this source; Handoff, when
	// Informer is nil, has it watched elsewhere.
	Informer *Informer
	// Handoff starts the watch of gvr elsewhere, on the actor; listed
	// must be called once what it first listed has reached the manager.
	// Whoever watches answers the replays.
	Handoff func(ctx actor.Context, gvr schema.GroupVersionResource, listed func())
}

// Logs are the messages the source logs as it goes.
type Logs struct {
	// Missing: the API server does not serve the resource (once, with
	// the error and how often it is asked again).
	Missing string
	// Failed: discovery failed (with the error and the wait).
	Failed string
	// Watching: the resource is served and watched (with its version).
	Watching string
	// WatchFailed: the informer's watch failed (Informer only).
	WatchFailed string
	// Listed: the first list is in (with how long it took).
	Listed string
}

// Informer is the watch of the resource through the dynamic client.
type Informer struct {
	Client dynamic.Interface
	// Transform, when set, converts or trims each object before the
	// informer caches it.
	Transform cache.TransformFunc
	// Handler returns the handler of the informer's events; replay says
	// it handles the cache for a replay (a replay reports nothing again).
	Handler func(send func(model.Change), replay bool) cache.ResourceEventHandler
}

// Source is the actor owning the discovery loop and the watch. Their
// goroutines stop, and are waited for, when the actor stops.
type Source struct {
	cfg      Config
	stop     chan struct{}
	informer cache.SharedIndexInformer // nil until the resource is watched here
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
	return actor.PropsFromProducer(func() actor.Actor { return &Source{cfg: cfg} }, zonemanager.BurstMailbox())
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
	case *zonemanager.Replay:
		s.replay(ctx, msg.ID)
	case *actor.Stopping:
		s.shutdown()
	}
}

// discover finds the resource to watch and tells the actor. While the
// API server is unreachable it retries with backoff; while it does not
// serve the resource the source counts as synced (there is nothing to
// wait for) and discovery is repeated every Recheck.
func (s *Source) discover(root *actor.RootContext, self *actor.PID) {
	var gvr schema.GroupVersionResource
	found := kubeclient.WaitServed(s.stop, kubeclient.Waits{Retry: s.cfg.Retry, Recheck: s.cfg.Recheck},
		func() (err error) { gvr, err = s.cfg.Find(); return err },
		func(err error) {
			s.cfg.Logger.Warn(s.cfg.Logs.Missing, "err", err, "every", s.cfg.Recheck)
			root.Send(s.cfg.Manager, &zonemanager.Synced{Source: s.cfg.Name, From: self})
		},
		func(err error, in time.Duration) {
			s.cfg.Logger.Warn(s.cfg.Logs.Failed, "err", err, "in", in)
		})
	if found {
		s.cfg.Logger.Info(s.cfg.Logs.Watching, "version", gvr.Version)
		root.Send(self, &discovered{gvr: gvr})
	}
}

// watch starts the watch of gvr and reports the source synced once it
// has listed.
func (s *Source) watch(ctx actor.Context, gvr schema.GroupVersionResource) {
	root, manager, self := ctx.ActorSystem().Root, s.cfg.Manager, ctx.Self()
	start := time.Now()
	listed := func() {
		s.cfg.Logger.Info(s.cfg.Logs.Listed, "took", time.Since(start).Round(time.Millisecond))
		root.Send(manager, &zonemanager.Synced{Source: s.cfg.Name, From: self})
	}
	if s.cfg.Informer == nil {
		s.cfg.Handoff(ctx, gvr, listed)
		return
	}
	client := s.cfg.Informer.Client
	resource := client.Resource(gvr)
	// As client-go's dynamic informer: the client says whether it can
	// stream the initial list (a fake cannot), else the reflector lists.
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return resource.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return resource.Watch(ctx, o)
		},
	}, client)
	inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
	if t := s.cfg.Informer.Transform; t != nil {
		if err := inf.SetTransform(t); err != nil {
			panic(fmt.Sprintf("%s source: setting the transform of a new informer: %v", s.cfg.Name, err))
		}
	}
	inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		s.cfg.Logger.Warn(s.cfg.Logs.WatchFailed, "err", err)
	})
	send := func(c model.Change) {
		root.Send(manager, &zonemanager.Apply{Source: s.cfg.Name, Changes: []model.Change{c}})
	}
	reg, err := inf.AddEventHandler(s.cfg.Informer.Handler(send, false))
	if err != nil {
		panic(fmt.Sprintf("%s source: adding a handler to a new informer: %v", s.cfg.Name, err))
	}
	s.informer = inf
	s.wg.Go(func() { inf.Run(s.stop) })
	s.wg.Go(func() {
		if cache.WaitForCacheSync(s.stop, reg.HasSynced) {
			listed()
		}
	})
}

// replay sends every object the informer cache holds, so the zone
// manager can load zones this replica gained. It reads the local cache
// only. With Handoff, whoever watches replays, and this source says only
// that it is done.
func (s *Source) replay(ctx actor.Context, id uint64) {
	if s.cfg.Informer != nil {
		var changes []model.Change
		if s.informer != nil {
			h := s.cfg.Informer.Handler(func(c model.Change) { changes = append(changes, c) }, true)
			for _, obj := range s.informer.GetStore().List() {
				h.OnAdd(obj, true) // as the initial list: no change in the API, no trigger
			}
		}
		ctx.Send(s.cfg.Manager, &zonemanager.Apply{Source: s.cfg.Name, Changes: changes, Replay: id})
	}
	ctx.Send(s.cfg.Manager, &zonemanager.ReplayDone{Source: s.cfg.Name, ID: id})
}

func (s *Source) shutdown() {
	if s.stop == nil {
		return
	}
	close(s.stop)
	s.wg.Wait()
}
