package kubernetes

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/sources"
	"github.com/shardns/shardns/sources/kubeclient"
)

// SourceName identifies this source in zone batches and logs.
const SourceName = "kubernetes"

// Config configures the Kubernetes source.
type Config struct {
	Client            *kubeclient.Client
	Manager           *actor.PID // receives the changes
	Namespaces        []string   // exposed namespaces; empty exposes all
	NamespaceSelector string     // label selector of exposed namespaces (server-side)
	LabelSelector     string     // label selector of services and endpoint slices (server-side)
	Pods              bool       // watch pods (pods: verified)
	// NoSharding watches every object even where the API server could
	// shard the watches (kubernetes.shardedWatch: false).
	NoSharding bool
	// PodsEverywhere keeps every pod watched when watches are sharded:
	// autopath needs every client's namespace on every replica.
	PodsEverywhere bool
	NoEndpoints    bool // do not watch endpoint slices
	// Interest says which namespaces this replica's zones are built from,
	// for sharded watches. Nil, or no ring, watches every namespace.
	Interest *zonemanager.Interest
	Logger   *slog.Logger
	// Skipped counts what the API served malformed for DNS, by kind and
	// what (object | field); may be nil.
	Skipped *prometheus.CounterVec
	// Events counts the objects the watches deliver, by kind and type;
	// ShardedWatch says whether they are sharded. Either may be nil.
	Events       *prometheus.CounterVec
	ShardedWatch prometheus.Gauge
	// Listing, when set, is told when an informer's list begins (true)
	// and ends (false), the first and every relist alike; it must not
	// block. The node runs the Go collector tight meanwhile.
	Listing func(began bool)
}

// Validate checks the selectors, so a typo fails at start-up.
func (c *Config) Validate() error {
	if _, err := labels.Parse(c.NamespaceSelector); err != nil {
		return fmt.Errorf("kubernetes.namespaceSelector: %w", err)
	}
	if _, err := labels.Parse(c.LabelSelector); err != nil {
		return fmt.Errorf("kubernetes.labelSelector: %w", err)
	}
	return nil
}

// Source is the actor owning the informers. Their goroutines stop, and are
// waited for, when the actor stops.
type Source struct {
	cfg     Config
	stop    chan struct{}
	watched []watched // every informer, when watches are not sharded
	exposed func(string) bool
	wg      sync.WaitGroup
	shardState
	extraState
}

// watched is one informer and the kind it delivers.
type watched struct {
	kind     model.Kind
	informer cache.SharedIndexInformer
	extra    *sources.Kind  // another source's kind; nil for this source's own
	pages    *pageTransform // the informer's transform, for its list pages; nil for another source's
}

// NewProps returns the props of a Source.
func NewProps(cfg Config) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &Source{cfg: cfg} }, zonemanager.BurstMailbox())
}

// Receive starts the watches and stops them.
func (s *Source) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.start(ctx)
	case *ingestMode:
		if msg.sharded {
			s.startSharded(ctx)
		} else {
			s.startFull(ctx)
		}
	case *zonemanager.Replay:
		if s.sharded && !s.shardsReady() {
			s.replaysWaiting = append(s.replaysWaiting, msg.ID) // answered once the new informers synced
		} else {
			s.replay(ctx, msg.ID)
		}
	case *zonemanager.InterestChanged:
		s.reshard(ctx)
	case *zonemanager.WatchEverything:
		s.onWatchEverything(ctx)
	case *sources.WatchKinds:
		s.onWatchKinds(ctx, msg)
	case *namespacesChanged:
		s.reshard(ctx)
	case *shardsSynced:
		s.onShardsSynced(ctx, msg)
	case *actor.Stopping:
		s.shutdown()
	}
}

func (s *Source) start(ctx actor.Context) {
	s.stop = make(chan struct{})
	s.started = time.Now()
	s.root = ctx.ActorSystem().Root
	s.exposed = s.exposedFunc()
	if !s.cfg.Interest.Clustered() || s.cfg.NoSharding {
		s.startFull(ctx)
		return
	}
	root, self, stop := ctx.ActorSystem().Root, ctx.Self(), s.stop
	s.wg.Go(func() {
		sharded, err := s.detectSharding(stop)
		if err != nil {
			return // stopping
		}
		if !sharded {
			s.cfg.Logger.Info("the API server does not shard watches (no shardInfo in its lists; Kubernetes 1.36+ with the ShardedListAndWatch feature gate does): every replica watches every object")
		}
		root.Send(self, &ingestMode{sharded: sharded})
	})
}

// objectsTweak applies kubernetes.labelSelector to Services and
// EndpointSlices.
func (s *Source) objectsTweak() func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) { o.LabelSelector = s.cfg.LabelSelector }
}

// namespacesTweak applies kubernetes.namespaceSelector to Namespaces.
func (s *Source) namespacesTweak() func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) { o.LabelSelector = s.cfg.NamespaceSelector }
}

// newWatched returns an informer of resource (objects of kind) in every
// namespace, or those tweak selects. No namespace index: nothing here
// looks objects up by namespace, and the index would hold a second copy
// of every key.
func (s *Source) newWatched(kind model.Kind, resource string, object runtime.Object, tweak func(*metav1.ListOptions)) watched {
	pages := &pageTransform{}
	lw := listWatch(s.cfg.Client, resource, tweak, s.cfg.Listing, pages)
	return watched{kind: kind, informer: cache.NewSharedIndexInformer(lw, object, 0, cache.Indexers{}), pages: pages}
}

// register sets w's transform, error logging and handler, and returns
// when the handler has seen the initial list and the entries the
// transform reuses. sharded, when set, is the sharded kind whose
// generation guards the handler.
func (s *Source) register(w watched, sharded *shardedKind) (cache.InformerSynced, *heldEntries) {
	kind := w.kind
	w.informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		s.cfg.Logger.Warn("kubernetes watch failed; serving the last known state and retrying",
			"kind", kind.String(), "err", err)
	})
	root, manager := s.root, s.cfg.Manager
	send := s.generationGuard(sharded, func(c model.Change) {
		root.Send(manager, &zonemanager.Apply{Source: SourceName, Changes: []model.Change{c}})
	})
	held := &heldEntries{own: w.informer.GetStore()}
	if w.extra != nil {
		return s.registerExtra(w, send), held
	}
	transform := transformFor(s.exposed, held, func(warnings []string) {
		for _, w := range warnings {
			s.cfg.Logger.Warn("serving the object without what the API served malformed", "warning", w)
			if s.cfg.Skipped != nil {
				s.cfg.Skipped.WithLabelValues(kind.String(), "field").Inc()
			}
		}
	})
	if err := w.informer.SetTransform(transform); err != nil {
		panic(fmt.Sprintf("kubernetes source: a new informer refused its transform: %v", err))
	}
	if w.pages != nil {
		w.pages.set(transform)
	}
	reg, err := w.informer.AddEventHandler(&handler{kind: kind, exposed: s.exposed, send: send, log: s.cfg.Logger,
		events: s.cfg.Events, skipped: s.cfg.Skipped})
	if err != nil {
		panic(fmt.Sprintf("kubernetes source: adding a handler to a new informer: %v", err))
	}
	return reg.HasSynced, held
}

// startFull watches every object of every kind.
func (s *Source) startFull(ctx actor.Context) {
	root, manager, self := s.root, s.cfg.Manager, ctx.Self()
	if s.cfg.ShardedWatch != nil {
		s.cfg.ShardedWatch.Set(0)
	}
	list := []watched{
		s.newWatched(model.KindNamespace, "namespaces", &corev1.Namespace{}, s.namespacesTweak()),
		s.newWatched(model.KindService, "services", &corev1.Service{}, s.objectsTweak()),
	}
	if !s.cfg.NoEndpoints {
		list = append(list, s.newWatched(model.KindEndpointSlice, "endpointslices", &discoveryv1.EndpointSlice{}, s.objectsTweak()))
	}
	if s.cfg.Pods {
		list = append(list, s.newWatched(model.KindPod, "pods", &corev1.Pod{}, nil))
	}
	for _, k := range s.extras {
		list = append(list, s.extraWatched(k, nil))
	}
	listed := s.takeListed()
	var synced []cache.InformerSynced
	for _, w := range list {
		reg, _ := s.register(w, nil)
		synced = append(synced, reg)
	}
	s.watched = list
	for _, w := range list {
		s.wg.Go(func() { w.informer.Run(s.stop) })
	}
	s.wg.Go(func() {
		if cache.WaitForCacheSync(s.stop, synced...) {
			s.cfg.Logger.Info("kubernetes initial list done", "took", time.Since(s.started).Round(time.Millisecond))
			root.Send(manager, &zonemanager.Synced{Source: SourceName, From: self})
			for _, f := range listed {
				f()
			}
		}
	})
}

// replay sends every object the informer caches hold, so the zone manager
// can load zones this replica gained. It reads local caches only: no
// request reaches the API server.
func (s *Source) replay(ctx actor.Context, id uint64) {
	var changes []model.Change
	for _, w := range s.informers() {
		h := s.replayHandler(w, func(c model.Change) { changes = append(changes, c) })
		for _, obj := range byNamespace(w.informer.GetStore().List()) {
			h.OnAdd(obj, true) // as the initial list: no change in the API, no trigger
		}
	}
	ctx.Send(s.cfg.Manager, &zonemanager.Apply{Source: SourceName, Changes: changes, Replay: id})
	ctx.Send(s.cfg.Manager, &zonemanager.ReplayDone{Source: SourceName, ID: id})
}

// byNamespace orders a store's entries by namespace and name. The store
// lists in map order, which mixes namespaces; replayed in this order,
// each zone's objects arrive together, and the records built from them
// lie together in memory, so a zone handed to another replica frees
// whole spans rather than holes among the zones kept.
func byNamespace(list []any) []any {
	identity := func(obj any) (namespace, name string) {
		if c, ok := obj.(*cached); ok { // the transform makes every entry one
			return c.namespace, c.name()
		}
		return "", ""
	}
	slices.SortFunc(list, func(a, b any) int {
		aNamespace, aName := identity(a)
		bNamespace, bName := identity(b)
		return cmp.Or(strings.Compare(aNamespace, bNamespace), strings.Compare(aName, bName))
	})
	return list
}

// exposedFunc implements kubernetes.namespaces; the namespace selector is
// applied by the API server to the namespace watch.
func (s *Source) exposedFunc() func(string) bool {
	if len(s.cfg.Namespaces) == 0 {
		return func(string) bool { return true }
	}
	set := map[string]bool{}
	for _, n := range s.cfg.Namespaces {
		set[n] = true
	}
	return func(ns string) bool { return set[ns] }
}

// informers lists every informer running.
func (s *Source) informers() []watched {
	if !s.sharded {
		return s.watched
	}
	list := slices.Clone(s.fixed)
	for _, k := range s.kinds {
		for _, si := range k.current {
			list = append(list, watched{kind: k.kind, informer: si.informer, extra: k.extra})
		}
	}
	return list
}

func (s *Source) shutdown() {
	if s.stop == nil {
		return
	}
	s.stopShards()
	close(s.stop)
	s.wg.Wait()
}
