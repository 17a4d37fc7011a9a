package kubernetes

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/sources"
)

// Kinds of other sources (sources.Kind). A namespaced kind whose objects
// build the zones of their namespace (the multicluster source's
// ServiceImports and imported EndpointSlices) is watched by this source
// beside its own, so that its watches follow the ring as the Services'
// do: one detection of sharded watches, one reshard on a ring or
// namespace change, one replay, one widening before leaving. The other
// source keeps what is its own: discovering the kind, converting its
// objects, saying it synced.

// extraState is the part of Source that other sources' kinds use.
type extraState struct {
	extras        []*sources.Kind // every kind asked for, for a start still to come
	listedWaiting []func()        // to call once the sharded informers have synced
}

// onWatchKinds starts watching msg's kinds the way this source's own
// kinds are watched, or, before detection has said which way that is,
// adds them to its start.
func (s *Source) onWatchKinds(ctx actor.Context, msg *sources.WatchKinds) {
	kinds := make([]*sources.Kind, len(msg.Kinds))
	for i := range msg.Kinds {
		kinds[i] = &msg.Kinds[i]
	}
	s.extras = append(s.extras, kinds...)
	switch {
	case s.sharded:
		for _, k := range kinds {
			s.kinds = append(s.kinds, &shardedKind{kind: k.Kind, extra: k})
		}
		s.listedWaiting = append(s.listedWaiting, msg.Listed)
		s.reshard(ctx)
		if s.shardsReady() {
			s.callListed() // no namespace of theirs is owned here: nothing to list
		}
	case s.watched != nil:
		var synced []cache.InformerSynced
		for _, k := range kinds {
			w := s.extraWatched(k, nil)
			reg, _ := s.register(w, nil)
			synced = append(synced, reg)
			s.watched = append(s.watched, w)
			s.wg.Go(func() { w.informer.Run(s.stop) })
		}
		stop := s.stop
		s.wg.Go(func() {
			if cache.WaitForCacheSync(stop, synced...) {
				msg.Listed()
			}
		})
	default:
		s.listedWaiting = append(s.listedWaiting, msg.Listed)
	}
}

// extraWatched returns an informer of k in every namespace, tweak applied
// to its options.
func (s *Source) extraWatched(k *sources.Kind, tweak func(*metav1.ListOptions)) watched {
	if tweak == nil {
		tweak = func(*metav1.ListOptions) {}
	}
	informer := cache.NewSharedIndexInformer(k.ListWatch(tweak), k.Object(), 0, cache.Indexers{})
	return watched{kind: k.Kind, informer: informer, extra: k}
}

// registerExtra sets the transform, error logging and handler of w, an
// informer of another source's kind. Its events are counted as this
// source's own are.
func (s *Source) registerExtra(w watched, send func(model.Change)) cache.InformerSynced {
	if err := w.informer.SetTransform(w.extra.Transform); err != nil {
		panic(fmt.Sprintf("kubernetes source: a new informer refused its transform: %v", err))
	}
	reg, err := w.informer.AddEventHandler(&counted{ResourceEventHandler: w.extra.Handler(send), kind: w.kind, events: s.cfg.Events})
	if err != nil {
		panic(fmt.Sprintf("kubernetes source: adding a handler to a new informer: %v", err))
	}
	return reg.HasSynced
}

// callListed tells the sources whose kinds were waiting for their lists.
func (s *Source) callListed() {
	for _, listed := range s.listedWaiting {
		listed()
	}
	s.listedWaiting = nil
}

// takeListed hands the waiting Listed calls over to a goroutine that
// calls them once the first lists have arrived.
func (s *Source) takeListed() []func() {
	listed := s.listedWaiting
	s.listedWaiting = nil
	return listed
}

// counted counts the events of another source's kind in
// shardns_kubernetes_events_total, beside this source's own.
type counted struct {
	cache.ResourceEventHandler
	kind   model.Kind
	events *prometheus.CounterVec // may be nil
}

func (c *counted) count(typ string) {
	if c.events != nil {
		c.events.WithLabelValues(c.kind.String(), typ).Inc()
	}
}

func (c *counted) OnAdd(obj any, initial bool) {
	c.count("add")
	c.ResourceEventHandler.OnAdd(obj, initial)
}

func (c *counted) OnUpdate(oldObj, newObj any) {
	c.count("update")
	c.ResourceEventHandler.OnUpdate(oldObj, newObj)
}

func (c *counted) OnDelete(obj any) {
	c.count("delete")
	c.ResourceEventHandler.OnDelete(obj)
}

// replayHandler returns the handler that turns w's cached objects into
// changes for a replay.
func (s *Source) replayHandler(w watched, send func(model.Change)) cache.ResourceEventHandler {
	if w.extra != nil {
		return w.extra.Handler(send)
	}
	return &handler{kind: w.kind, exposed: s.exposed, log: s.cfg.Logger, send: send}
}
