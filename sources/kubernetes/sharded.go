package kubernetes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/sources"
)

// Sharded ingest. When the API server applies shard selectors (Kubernetes
// 1.36+ with the ShardedListAndWatch feature gate), a replica in a cluster
// watches the Services, EndpointSlices and Pods of the namespaces whose
// zones it owns only, with a shardSelector that is the union of the hash
// ranges of those namespaces (watchRanges). Every replica
// still watches every Namespace, which is how it knows the ranges.
//
// A namespace this replica gains (a ring change, or a new namespace) adds
// an informer for it alone, so the objects already held are not listed
// again. A namespace it loses (a ring change) replaces a kind's informers
// with one for what it owns now: the old ones stop and their later events
// are dropped (a generation number); once the new one has synced, what
// the old ones held in namespaces still owned but the new one does not
// hold was deleted meanwhile, and a delete is sent for it. Objects of the
// namespaces lost are not deleted: the zones they built serve through
// their grace period, and the zone manager forgets them when it releases
// those zones.
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
	extra    *sources.Kind // another source's kind (resource, object and tweak unused)
	// current are the informers running: the one a ring change made, then
	// one for each batch of new namespaces this replica owns.
	current []*shardInformer
	// owned is what current was made for: the namespaces, or everything.
	owned    map[string]bool
	everyone bool
	gen      uint64 // of current; guarded by Source.mu
	// retired are the informers a ring change replaced since current last
	// synced: what they held is checked against current once it has.
	retired []cache.Store
}

// shardInformer is one informer of a sharded kind and how to stop it.
type shardInformer struct {
	informer cache.SharedIndexInformer
	stop     chan struct{}
	synced   cache.InformerSynced
	held     *heldEntries
}

// maxAdded bounds the informers new namespaces add to a kind; beyond it
// the next change replaces them all with one.
const maxAdded = 64

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
		err := s.cfg.Client.CoreV1().Get().Resource("services").
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
	root.Send(s.cfg.Manager, &zonemanager.IngestSharded{})
	if s.cfg.ShardedWatch != nil {
		s.cfg.ShardedWatch.Set(1)
	}
	s.kinds = []*shardedKind{{kind: model.KindService, resource: "services", object: func() runtime.Object { return &corev1.Service{} }, tweak: s.objectsTweak()}}
	if !s.cfg.NoEndpoints {
		s.kinds = append(s.kinds, &shardedKind{kind: model.KindEndpointSlice, resource: "endpointslices",
			object: func() runtime.Object { return &discoveryv1.EndpointSlice{} }, tweak: s.objectsTweak()})
	}
	fixed := []watched{s.newWatched(model.KindNamespace, "namespaces", &corev1.Namespace{}, s.namespacesTweak())}
	if s.cfg.Pods && s.cfg.PodsEverywhere {
		fixed = append(fixed, s.newWatched(model.KindPod, "pods", &corev1.Pod{}, nil))
	} else if s.cfg.Pods {
		s.kinds = append(s.kinds, &shardedKind{kind: model.KindPod, resource: "pods", object: func() runtime.Object { return &corev1.Pod{} }})
	}
	for _, k := range s.extras {
		s.kinds = append(s.kinds, &shardedKind{kind: k.Kind, extra: k})
	}
	var synced []cache.InformerSynced
	for _, w := range fixed {
		reg, _ := s.register(w, nil)
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

// Replicas started together (a first rollout: the StatefulSet's Parallel
// pod management) join the ring one after another within a second or so.
// The first to list would see itself alone, own every namespace and list
// the whole cluster, then narrow its watches as the others join: its
// memory's peak, for objects it keeps a moment. So the first sharded list
// waits until the ring's members have been the same for ringSettle, for
// ringSettleMax from the source's start at most (a ring that keeps
// changing).
const (
	ringSettle    = time.Second
	ringSettleMax = 5 * time.Second
)

// settleWait is how much longer the first sharded list waits for the
// ring to settle.
func (s *Source) settleWait() time.Duration {
	if s.cfg.Interest == nil {
		return 0
	}
	wait := ringSettle - s.cfg.Interest.Unchanged()
	return min(wait, ringSettleMax-time.Since(s.started))
}

// reshard makes each sharded kind's informers select the namespaces this
// replica owns. When it owns namespaces it did not (a ring change), the
// kind gets one new informer for all it owns, replacing the others; a new
// namespace it owns only adds an informer for that namespace, so creating
// a namespace does not list again what the replica already holds.
func (s *Source) reshard(ctx actor.Context) {
	if !s.sharded || s.namespaces == nil || !s.namespaces.HasSynced() {
		return
	}
	first := !s.ringSettled
	if first {
		if wait := s.settleWait(); wait > 0 {
			scheduler.NewTimerScheduler(ctx).SendOnce(wait, ctx.Self(), &namespacesChanged{})
			return
		}
		s.ringSettled = true
	}
	var all []string
	for _, obj := range s.namespaces.GetStore().List() {
		if c, ok := obj.(*cached); ok && s.exposed(c.name()) {
			all = append(all, c.name())
		}
	}
	exists := map[string]bool{}
	for _, ns := range all {
		exists[ns] = true
	}
	changed := false
	for _, k := range s.kinds {
		owned := map[string]bool{}
		for _, ns := range all {
			if s.cfg.Interest.Serves(k.kind, ns) {
				owned[ns] = true
			}
		}
		if k.everyone || len(owned) == 0 && len(k.current) == 0 {
			continue
		}
		forgetDeleted(k, exists)
		var added []string
		for ns := range owned {
			if !k.owned[ns] {
				added = append(added, ns)
			}
		}
		switch {
		case s.wide:
			s.replace(k, nil, all)
		case lostAny(k, owned):
			s.replace(k, owned, all)
		case len(added) == 0:
			continue
		case len(k.current) >= maxAdded:
			s.replace(k, owned, all)
		default:
			if k.owned == nil {
				k.owned = map[string]bool{}
			}
			for _, ns := range added {
				k.owned[ns] = true
			}
			s.addInformer(k, watchRanges(all, added))
		}
		changed = true
	}
	if !changed {
		if first {
			// Nothing to list (no namespace owned): the source has
			// synced with the fixed informers.
			ctx.Send(ctx.Self(), &shardsSynced{wave: s.wave})
		}
		return
	}
	s.wave++
	wave := s.wave
	var synced []cache.InformerSynced
	for _, k := range s.kinds {
		for _, si := range k.current {
			synced = append(synced, si.synced)
		}
	}
	// A newer wave supersedes this one's wait: an informer it waits for
	// may have been stopped before it synced.
	if s.waveDone != nil {
		close(s.waveDone)
	}
	done := make(chan struct{})
	s.waveDone = done
	s.watchStall(done, synced)
	root, self, stop := ctx.ActorSystem().Root, ctx.Self(), s.stop
	s.wg.Go(func() {
		until := make(chan struct{})
		go func() {
			select {
			case <-stop:
			case <-done:
			}
			close(until)
		}()
		if cache.WaitForCacheSync(until, synced...) {
			root.Send(self, &shardsSynced{wave: wave})
		}
	})
}

// stallProbe is how often the source asks whether the API server answers
// while a wave's lists have not come; stallProbeTimeout how long it waits
// for the answer. An API server busy with the lists of every replica at
// once (a replica joining a ring of five at 20k services) took more than
// half a second to answer /readyz: the zones the joining replica gained
// were then loaded twice, from the other replicas and from its list.
const (
	stallProbe        = 500 * time.Millisecond
	stallProbeTimeout = 5 * time.Second
)

// watchStall tells the zone manager when the lists of a wave do not come
// because the API server does not answer (zonemanager.SourceStalled): the zones
// the wave's namespaces gained then load from the replicas that held
// them. A reflector retries a refused list without a word (its error
// handler is not called), so the source asks the API server's /readyz
// itself at once, then stallProbe after each answer until the wave has
// synced or a newer one started (done). A refused connection, a 5xx or
// no answer within stallProbeTimeout is a stall (see answers).
func (s *Source) watchStall(done <-chan struct{}, synced []cache.InformerSynced) {
	root, manager, rc, stop := s.root, s.cfg.Manager, s.cfg.Client.CoreV1(), s.stop
	s.wg.Go(func() {
		for {
			if allSynced(synced) {
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), stallProbeTimeout)
			go func() {
				select {
				case <-done:
				case <-stop:
				case <-ctx.Done():
				}
				cancel() // a stopping source or a newer wave ends the probe
			}()
			err := rc.Get().AbsPath("/readyz").Do(ctx).Error()
			cancel()
			select {
			case <-done:
				return
			case <-stop:
				return
			default:
			}
			if err != nil && !answers(err) {
				root.Send(manager, &zonemanager.SourceStalled{Source: SourceName})
				return
			}
			select {
			case <-done:
				return
			case <-stop:
				return
			case <-time.After(stallProbe):
			}
		}
	})
}

// answers reports whether err from /readyz is the API server's own word
// that it serves (a 4xx: this replica may not read /readyz, where the
// default system:public-info-viewer role was removed) rather than that it
// cannot (a refused connection, no answer, or a 5xx: not ready).
func answers(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status) && status.Status().Code > 0 && status.Status().Code < 500
}

// allSynced reports whether every one of synced has.
func allSynced(synced []cache.InformerSynced) bool {
	for _, f := range synced {
		if !f() {
			return false
		}
	}
	return true
}

// watchRanges are the hash ranges that select namespaces among all. A
// few get one range each, their own hash alone: a run across them would
// also take in the namespaces created later between them, mostly other
// replicas', whose objects the watch would then deliver and the informer
// keep. Many get the runs among all that cluster.NamespaceRanges gives,
// so that the selector stays short.
func watchRanges(all, namespaces []string) []cluster.HashRange {
	if len(namespaces) > maxPointRanges {
		selected := map[string]bool{}
		for _, ns := range namespaces {
			selected[ns] = true
		}
		return cluster.NamespaceRanges(all, func(ns string) bool { return selected[ns] })
	}
	var ranges []cluster.HashRange
	for _, ns := range namespaces {
		h := cluster.NamespaceHash(ns)
		ranges = append(ranges, cluster.HashRange{Start: h, End: h})
	}
	slices.SortFunc(ranges, func(a, b cluster.HashRange) int { return cmp.Compare(a.Start, b.Start) })
	return ranges
}

// maxPointRanges is the most namespaces a watch selects with a range each.
const maxPointRanges = 64

// forgetDeleted drops from what k watches the namespaces deleted: their
// objects are gone with them, and no informer needs replacing for them.
func forgetDeleted(k *shardedKind, exists map[string]bool) {
	for ns := range k.owned {
		if !exists[ns] {
			delete(k.owned, ns)
		}
	}
}

// lostAny reports whether k watches a namespace this replica no longer
// owns: a ring change took it, and k's informers are replaced, so as not
// to keep receiving it.
func lostAny(k *shardedKind, owned map[string]bool) bool {
	for ns := range k.owned {
		if !owned[ns] {
			return true
		}
	}
	return false
}

// replace stops k's informers and starts one for owned (nil: every
// namespace); the stopped ones' later events are dropped.
func (s *Source) replace(k *shardedKind, owned map[string]bool, all []string) {
	s.mu.Lock()
	k.gen++
	s.mu.Unlock()
	for _, si := range k.current {
		close(si.stop)
		k.retired = append(k.retired, si.informer.GetStore())
	}
	k.current, k.owned, k.everyone = nil, owned, owned == nil
	if owned == nil {
		s.addInformer(k, nil)
		return
	}
	if len(owned) > 0 {
		s.addInformer(k, watchRanges(all, slices.Collect(maps.Keys(owned))))
	}
}

// addInformer starts an informer of k for ranges (nil: every namespace).
func (s *Source) addInformer(k *shardedKind, ranges []cluster.HashRange) {
	selector := cluster.ShardSelector(cluster.NamespaceField, ranges)
	tweak := k.tweak
	withSelector := func(o *metav1.ListOptions) {
		if tweak != nil {
			tweak(o)
		}
		o.ShardSelector = selector
	}
	var w watched
	if k.extra != nil {
		w = s.extraWatched(k.extra, withSelector)
	} else {
		w = s.newWatched(k.kind, k.resource, k.object(), withSelector)
	}
	informer := w.informer
	si := &shardInformer{informer: informer, stop: make(chan struct{})}
	si.synced, si.held = s.register(w, k)
	if len(k.retired) > 0 {
		// What a replaced informer held in the namespaces still owned
		// comes back in this one's list: reuse it (heldEntries).
		replaced := slices.Clone(k.retired)
		si.held.replaced.Store(&replaced)
	}
	k.current = append(k.current, si)
	s.wg.Go(func() { informer.Run(si.stop) })
	if ranges == nil {
		s.cfg.Logger.Info("watching every namespace", "kind", k.kind.String())
	} else {
		s.cfg.Logger.Info("watching namespaces by hash range", "kind", k.kind.String(), "ranges", len(ranges), "informers", len(k.current))
	}
}

// onShardsSynced finishes what waited for the informers of gen: deletes
// for objects gone while the selectors changed, the first Synced, replays.
func (s *Source) onShardsSynced(ctx actor.Context, msg *shardsSynced) {
	if msg.wave != s.wave || !s.shardsReady() {
		return // a newer generation is on its way
	}
	for _, k := range s.kinds {
		s.sendDeleted(ctx, k)
		for _, si := range k.current {
			si.held.replaced.Store(nil) // listed: let the replaced stores go
		}
	}
	if !s.syncedOnce {
		s.syncedOnce = true
		s.cfg.Logger.Info("kubernetes initial list done", "took", time.Since(s.started).Round(time.Millisecond))
		ctx.Send(s.cfg.Manager, &zonemanager.Synced{Source: SourceName, From: ctx.Self()})
	}
	s.callListed()
	waiting := s.replaysWaiting
	s.replaysWaiting = nil
	for _, id := range waiting {
		s.replay(ctx, id)
	}
	s.answerWide(ctx)
}

// onWatchEverything widens every sharded kind's watch to every namespace
// (see zonemanager.WatchEverything); the answer waits for their lists.
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
		if s.cfg.ShardedWatch != nil {
			s.cfg.ShardedWatch.Set(0) // its watches take every object from now on
		}
		ctx.Send(s.cfg.Manager, &zonemanager.IngestWide{}) // before the wide watches' first batch
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
		ctx.Send(pid, &zonemanager.WatchingEverything{})
	}
	s.wideWaiters = nil
}

// shardsReady reports whether the namespace informer and every current
// sharded informer have synced.
func (s *Source) shardsReady() bool {
	if s.namespaces == nil || !s.namespaces.HasSynced() || !s.ringSettled {
		return false
	}
	for _, w := range s.fixed {
		if !w.informer.HasSynced() {
			return false
		}
	}
	for _, k := range s.kinds {
		for _, si := range k.current {
			if !si.synced() {
				return false
			}
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
	holds := func(key string) bool {
		for _, si := range k.current {
			if _, ok, _ := si.informer.GetStore().GetByKey(key); ok {
				return true
			}
		}
		return false
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
			if holds(key) {
				continue
			}
			changes = append(changes, model.Change{Key: model.Key{Kind: k.kind, Namespace: ns, Name: name}})
		}
	}
	k.retired = nil
	if len(changes) > 0 {
		ctx.Send(s.cfg.Manager, &zonemanager.Apply{Source: SourceName, Changes: changes})
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
		for _, si := range k.current {
			close(si.stop)
		}
		k.current = nil
	}
}

// shardState is the part of Source that sharded ingest uses.
type shardState struct {
	sharded        bool
	kinds          []*shardedKind
	fixed          []watched
	namespaces     cache.SharedIndexInformer
	mu             sync.RWMutex  // guards the kinds' gen against the informers' handlers
	wave           uint64        // reshards that started informers
	waveDone       chan struct{} // closed when a newer wave starts
	syncedOnce     bool
	started        time.Time
	replaysWaiting []uint64
	wide           bool         // watching every namespace again (leaving)
	ringSettled    bool         // the first list waited for the ring (settleWait)
	wideWaiters    []*actor.PID // to answer once the wide watches synced
	root           *actor.RootContext
}
