package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/shardns/shardns/actors/zones"
	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/model"
)

// Sharded ingest. When the API server applies shard selectors (Kubernetes
// 1.36+ with the ShardedListAndWatch feature gate), a replica in a cluster
// watches the Services, EndpointSlices and Pods of the namespaces whose
// zones it owns only: one informer a kind, whose shardSelector is the union
// of the hash ranges of those namespaces (cluster.NamespaceRanges). Every
// replica still watches every Namespace, which is how it knows the ranges.
//
// When the ring or the namespaces change, a kind whose selector changed
// gets a new informer: the old one stops and its later events are dropped
// (a generation number), the new one lists what the replica owns now, and
// once it has synced, what the old one held in namespaces still owned but
// the new one does not hold was deleted meanwhile: a delete is sent for it.
// Objects of namespaces no longer owned are not deleted: the zones they
// built serve through their grace period, and the zone manager forgets
// them when it releases those zones.
//
// An API server that ignores shard selectors (an older one, or the gate
// off) leaves shardInfo out of its list responses: detected at start,
// logged once, and the replica watches everything as before.

// detectTimeout bounds one attempt at the detection list.
const detectTimeout = 10 * time.Second

// shardedKind is one kind watched by namespace ranges.
type shardedKind struct {
	kind     model.Kind
	resource string
	object   func() runtime.Object
	tweak    func(*metav1.ListOptions)
	selector string // the current informer's; "" with no informer
	current  *shardInformer
	gen      uint64 // of the current informer; guarded by Source.mu
	// retired are the informers replaced since the current one last
	// synced: what they held is checked against it once it has.
	retired []cache.Store
}

// shardInformer is one informer of a sharded kind and how to stop it.
type shardInformer struct {
	informer cache.SharedIndexInformer
	stop     chan struct{}
	synced   cache.InformerSynced
}

// ingestMode tells the source actor what detection found.
type ingestMode struct{ sharded bool }

// shardsSynced tells the source actor that the informers started by
// reshard number wave have synced.
type shardsSynced struct{ wave uint64 }

// namespacesChanged tells the source actor that a namespace came or went.
type namespacesChanged struct{}

// detectSharding asks the API server for one Service with a selector of
// the whole hash space, until it answers: shardInfo in the answer means it
// applies shard selectors.
func (s *Source) detectSharding(stopped <-chan struct{}) (bool, error) {
	backoff := 200 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), detectTimeout)
		list := &corev1.ServiceList{}
		err := s.cfg.Client.core.Get().Resource("services").
			VersionedParams(&metav1.ListOptions{
				Limit:         1,
				ShardSelector: cluster.ShardSelector(cluster.NamespaceField, []cluster.HashRange{{Start: 0, End: ^uint64(0)}}),
			}, metav1.ParameterCodec).Do(ctx).Into(list)
		cancel()
		if err == nil {
			return list.ShardInfo != nil, nil
		}
		s.cfg.Logger.Warn("asking the API server whether it shards watches; retrying", "err", err)
		select {
		case <-stopped:
			return false, errors.New("stopped")
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// startSharded starts the namespace informer (and the pod one when
// autopath needs every pod); the sharded kinds start once the namespaces
// are known.
func (s *Source) startSharded(ctx actor.Context) {
	s.sharded = true
	s.cfg.Logger.Info("the API server shards watches: this replica watches the Services, EndpointSlices and Pods of the namespaces it owns")
	root, self := ctx.ActorSystem().Root, ctx.Self()
	root.Send(s.cfg.Manager, &zones.IngestSharded{})
	if s.cfg.ShardedWatch != nil {
		s.cfg.ShardedWatch.Set(1)
	}
	s.kinds = []*shardedKind{{kind: model.KindService, resource: "services", object: func() runtime.Object { return &corev1.Service{} }, tweak: s.objectsTweak()}}
	if !s.cfg.NoEndpoints {
		s.kinds = append(s.kinds, &shardedKind{kind: model.KindEndpointSlice, resource: "endpointslices",
			object: func() runtime.Object { return &discoveryv1.EndpointSlice{} }, tweak: s.objectsTweak()})
	}
	fixed := []watched{{model.KindNamespace, s.newInformer("namespaces", &corev1.Namespace{}, s.namespacesTweak())}}
	if s.cfg.Pods && s.cfg.PodsEverywhere {
		fixed = append(fixed, watched{model.KindPod, s.newInformer("pods", &corev1.Pod{}, nil)})
	} else if s.cfg.Pods {
		s.kinds = append(s.kinds, &shardedKind{kind: model.KindPod, resource: "pods", object: func() runtime.Object { return &corev1.Pod{} }})
	}
	var synced []cache.InformerSynced
	for _, w := range fixed {
		reg := s.register(w, nil)
		synced = append(synced, reg)
		if w.kind == model.KindNamespace {
			// New namespaces may be owned here: their objects need a wider
			// selector.
			if _, err := w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc:    func(any) { root.Send(self, &namespacesChanged{}) },
				DeleteFunc: func(any) { root.Send(self, &namespacesChanged{}) },
			}); err != nil {
				panic(fmt.Sprintf("kubernetes source: adding a handler to a new informer: %v", err))
			}
			s.namespaces = w.informer
		}
	}
	s.fixed = fixed
	for _, w := range fixed {
		s.wg.Go(func() { w.informer.Run(s.stop) })
	}
	s.wg.Go(func() {
		if cache.WaitForCacheSync(s.stop, synced...) {
			root.Send(self, &namespacesChanged{})
			root.Send(self, &shardsSynced{wave: 0}) // the fixed informers' sync
		}
	})
}

// reshard gives every sharded kind whose selector changed a new informer.
func (s *Source) reshard(ctx actor.Context) {
	if !s.sharded || s.namespaces == nil || !s.namespaces.HasSynced() {
		return
	}
	var all []string
	for _, obj := range s.namespaces.GetStore().List() {
		if c, ok := obj.(*cached); ok && s.exposed(c.name) {
			all = append(all, c.name)
		}
	}
	changed := false
	for _, k := range s.kinds {
		ranges := cluster.NamespaceRanges(all, func(ns string) bool { return s.cfg.Interest.Serves(k.kind, ns) })
		selector := cluster.ShardSelector(cluster.NamespaceField, ranges)
		if s.wide {
			selector = everything
		}
		if selector == k.selector && (k.current != nil || selector == "") {
			continue
		}
		changed = true
		s.mu.Lock()
		k.gen++
		s.mu.Unlock()
		if old := k.current; old != nil {
			close(old.stop)
			k.retired = append(k.retired, old.informer.GetStore())
		}
		k.selector, k.current = selector, nil
		if selector == "" {
			continue
		}
		tweak := k.tweak
		lw := s.cfg.Client.listWatch(k.resource, func(o *metav1.ListOptions) {
			if tweak != nil {
				tweak(o)
			}
			if selector != everything {
				o.ShardSelector = selector
			}
		})
		informer := cache.NewSharedIndexInformer(lw, k.object(), 0, cache.Indexers{})
		si := &shardInformer{informer: informer, stop: make(chan struct{})}
		si.synced = s.register(watched{k.kind, informer}, k)
		k.current = si
		s.wg.Go(func() { informer.Run(si.stop) })
		if selector == everything {
			s.cfg.Logger.Info("watching every namespace", "kind", k.kind.String())
		} else {
			s.cfg.Logger.Info("watching namespaces by hash range", "kind", k.kind.String(), "ranges", len(ranges))
		}
	}
	if !changed {
		return
	}
	s.wave++
	wave := s.wave
	var synced []cache.InformerSynced
	for _, k := range s.kinds {
		if k.current != nil {
			synced = append(synced, k.current.synced)
		}
	}
	root, self, stop := ctx.ActorSystem().Root, ctx.Self(), s.stop
	s.wg.Go(func() {
		if cache.WaitForCacheSync(stop, synced...) {
			root.Send(self, &shardsSynced{wave: wave})
		}
	})
}

// onShardsSynced finishes what waited for the informers of gen: deletes
// for objects gone while the selectors changed, the first Synced, replays.
func (s *Source) onShardsSynced(ctx actor.Context, msg *shardsSynced) {
	if msg.wave != s.wave || !s.shardsReady() {
		return // a newer generation is on its way
	}
	for _, k := range s.kinds {
		s.sendDeleted(ctx, k)
	}
	if !s.syncedOnce {
		s.syncedOnce = true
		s.cfg.Logger.Info("kubernetes initial list done", "took", time.Since(s.started).Round(time.Millisecond))
		ctx.Send(s.cfg.Manager, &zones.Synced{Source: SourceName, From: ctx.Self()})
	}
	waiting := s.replaysWaiting
	s.replaysWaiting = nil
	for _, id := range waiting {
		s.replay(ctx, id)
	}
	s.answerWide(ctx)
}

// everything stands for a sharded kind's informer without a selector.
const everything = "*"

// onWatchEverything widens every sharded kind's watch to every namespace
// (see zones.WatchEverything); the answer waits for their lists.
func (s *Source) onWatchEverything(ctx actor.Context) {
	if ctx.Sender() != nil {
		s.wideWaiters = append(s.wideWaiters, ctx.Sender())
	}
	if !s.sharded {
		s.answerWide(ctx) // every object is watched already, or will be
		return
	}
	if !s.wide {
		s.wide = true
		s.cfg.Logger.Info("leaving: watching every namespace again, so that this replica can answer every zone alone")
		s.reshard(ctx)
	}
	if s.shardsReady() {
		s.answerWide(ctx)
	}
}

// answerWide answers the WatchEverything requests once every object is
// held: with sharded watches, once the widened informers have synced.
func (s *Source) answerWide(ctx actor.Context) {
	if s.sharded && (!s.wide || !s.shardsReady()) {
		return
	}
	for _, pid := range s.wideWaiters {
		ctx.Send(pid, &zones.WatchingEverything{})
	}
	s.wideWaiters = nil
}

// shardsReady reports whether the namespace informer and every current
// sharded informer have synced.
func (s *Source) shardsReady() bool {
	if s.namespaces == nil || !s.namespaces.HasSynced() {
		return false
	}
	for _, w := range s.fixed {
		if !w.informer.HasSynced() {
			return false
		}
	}
	for _, k := range s.kinds {
		if k.current != nil && !k.current.synced() {
			return false
		}
	}
	return true
}

// sendDeleted sends a delete for every object that k's retired informers
// held in a namespace still owned here and that its current one does not
// hold: it was deleted while no informer of k watched it.
func (s *Source) sendDeleted(ctx actor.Context, k *shardedKind) {
	if len(k.retired) == 0 {
		return
	}
	var now cache.Store
	if k.current != nil {
		now = k.current.informer.GetStore()
	}
	seen := map[string]bool{}
	var changes []model.Change
	for _, old := range k.retired {
		for _, key := range old.ListKeys() {
			if seen[key] {
				continue
			}
			seen[key] = true
			ns, name, err := cache.SplitMetaNamespaceKey(key)
			if err != nil || !s.cfg.Interest.Serves(k.kind, ns) || !s.exposed(ns) {
				continue
			}
			if now != nil {
				if _, ok, _ := now.GetByKey(key); ok {
					continue
				}
			}
			changes = append(changes, model.Change{Key: model.Key{Kind: k.kind, Namespace: ns, Name: name}})
		}
	}
	k.retired = nil
	if len(changes) > 0 {
		ctx.Send(s.cfg.Manager, &zones.Apply{Source: SourceName, Changes: changes})
	}
}

// generationGuard wraps send so that an informer of k replaced by a newer
// one sends nothing more: its events would race the new one's. It reads
// k's generation when called, that is when the informer is made.
func (s *Source) generationGuard(k *shardedKind, send func(model.Change)) func(model.Change) {
	if k == nil {
		return send
	}
	s.mu.RLock()
	gen := k.gen
	s.mu.RUnlock()
	return func(c model.Change) {
		s.mu.RLock()
		defer s.mu.RUnlock()
		if k.gen == gen {
			send(c)
		}
	}
}

// stopShards stops the sharded informers.
func (s *Source) stopShards() {
	for _, k := range s.kinds {
		if k.current != nil {
			close(k.current.stop)
			k.current = nil
		}
	}
}

// shardState is the part of Source that sharded ingest uses.
type shardState struct {
	sharded        bool
	kinds          []*shardedKind
	fixed          []watched
	namespaces     cache.SharedIndexInformer
	mu             sync.RWMutex // guards the kinds' gen against the informers' handlers
	wave           uint64       // reshards that started informers
	syncedOnce     bool
	started        time.Time
	replaysWaiting []uint64
	wide           bool         // watching every namespace again (leaving)
	wideWaiters    []*actor.PID // to answer once the wide watches synced
	root           *actor.RootContext
}
