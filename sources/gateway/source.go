// Package gateway is the Gateway API source: it answers what CoreDNS's
// external k8s_gateway plugin answers, the hostnames of HTTPRoutes,
// TLSRoutes and GRPCRoutes (the addresses of the Gateways they attach
// to), the hosts of Ingresses and the LoadBalancer Services (their load
// balancers' addresses), under the zones it is configured with.
//
// Each zone is built whole (records.go) and sent to the zone manager as
// an authoritative zone of its own, the kind a zone file makes: it is
// sharded by its origin like every zone, and answered as a file zone is
// (SOA and NS at the apex, NXDOMAIN for names it lacks, NODATA for types
// a name lacks, RFC 4592 wildcards for wildcard hostnames).
//
// The Gateway API kinds are custom resources: a cluster without their
// CRDs is not an error, those kinds have nothing to answer until they
// are installed (discovery is repeated now and then).
package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/sources/kubeclient"
	"github.com/shardns/shardns/zone"
)

// SourceName identifies this source in zone batches, logs and readiness.
const SourceName = "gateway"

// Config configures the Gateway API source.
type Config struct {
	Client    dynamic.Interface
	Discovery kubeclient.Discovery
	Zones     []string // origins of the zones answered
	Settings  Settings
	Manager   *actor.PID // receives the zones
	Logger    *slog.Logger
	// Retry is the longest wait between discovery attempts while the API
	// server cannot be reached. Default 30 s.
	Retry time.Duration
	// Recheck is how often discovery is repeated while a Gateway API kind
	// is not served. Default one minute.
	Recheck time.Duration
}

// watched is one kind the source reads.
type watched struct {
	kind     string // "Gateway" or one of the resource kinds
	group    string
	resource string
	versions []string // best first; the built-in kinds have one, always served
	convert  convertFunc
}

// gatewayGroup is the Gateway API's group.
const gatewayGroup = "gateway.networking.k8s.io"

// watchedKinds returns what the resources need: the kinds themselves,
// and Gateways when a route kind is among them.
func watchedKinds(resources []string) []watched {
	if len(resources) == 0 {
		resources = DefaultResources
	}
	var out []watched
	routes := false
	for _, r := range resources {
		switch r {
		case KindHTTPRoute:
			out = append(out, watched{r, gatewayGroup, "httproutes", []string{"v1", "v1beta1"}, convertRoute(r)})
		case KindTLSRoute:
			out = append(out, watched{r, gatewayGroup, "tlsroutes", []string{"v1", "v1alpha3", "v1alpha2"}, convertRoute(r)})
		case KindGRPCRoute:
			out = append(out, watched{r, gatewayGroup, "grpcroutes", []string{"v1", "v1alpha2"}, convertRoute(r)})
		case KindIngress:
			out = append(out, watched{r, "networking.k8s.io", "ingresses", []string{"v1"}, convertIngress})
		case KindService:
			out = append(out, watched{r, "", "services", []string{"v1"}, convertService})
		default:
			continue
		}
		routes = routes || out[len(out)-1].group == gatewayGroup
	}
	if routes {
		out = append(out, watched{"Gateway", gatewayGroup, "gateways", []string{"v1", "v1beta1"}, convertGateway})
	}
	return out
}

// Source is the actor owning the informers. Their goroutines stop, and
// are waited for, when the actor stops.
type Source struct {
	cfg       Config
	kinds     []watched
	stop      chan struct{}
	wg        sync.WaitGroup
	informers []cache.SharedIndexInformer // of the kinds being watched
	ready     map[string]bool             // kinds listed, or not served
	synced    bool                        // reported to the manager
	dirty     atomic.Bool                 // a flush is queued
	served    map[string]*served          // by origin: what the manager was sent
}

// served is the last content sent for one zone.
type served struct {
	zone   *zone.FileZone
	digest string // its address records, to tell a change
}

// Messages of the source to itself.
type (
	discovered struct {
		w   watched
		gvr schema.GroupVersionResource
	}
	kindReady struct{ kind string } // listed, or not served
	flush     struct{}
)

// NewProps returns the props of a Source.
func NewProps(cfg Config) *actor.Props {
	if cfg.Retry <= 0 {
		cfg.Retry = 30 * time.Second
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = time.Minute
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &Source{cfg: cfg, kinds: watchedKinds(cfg.Settings.Resources), ready: map[string]bool{}, served: map[string]*served{}}
	})
}

// Receive discovers the kinds, watches them, and sends the zones again
// whenever an object changes.
func (s *Source) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		s.onStarted(ctx)
	case *discovered:
		s.watch(ctx, msg.w, msg.gvr)
	case *kindReady:
		s.ready[msg.kind] = true
		if !s.synced && len(s.ready) == len(s.kinds) {
			s.synced = true
			s.onFlush(ctx)
			ctx.Send(s.cfg.Manager, &zonemanager.Synced{Source: SourceName, From: ctx.Self()})
		}
	case *flush:
		if s.synced {
			s.onFlush(ctx)
		} else {
			s.dirty.Store(false) // the first flush comes once every kind is listed
		}
	case *zonemanager.Replay:
		var changes []model.Change
		for _, o := range s.cfg.Zones {
			if z := s.served[zone.Fqdn(o)]; z != nil {
				changes = append(changes, change(z.zone))
			}
		}
		ctx.Send(s.cfg.Manager, &zonemanager.Apply{Source: SourceName, Changes: changes, Replay: msg.ID})
		ctx.Send(s.cfg.Manager, &zonemanager.ReplayDone{Source: SourceName, ID: msg.ID})
	case *actor.Stopping:
		if s.stop != nil {
			close(s.stop)
			s.wg.Wait()
		}
	}
}

func (s *Source) onStarted(ctx actor.Context) {
	s.stop = make(chan struct{})
	root, self := ctx.ActorSystem().Root, ctx.Self()
	for _, w := range s.kinds {
		if w.group != gatewayGroup {
			root.Send(self, &discovered{w: w, gvr: schema.GroupVersionResource{Group: w.group, Version: w.versions[0], Resource: w.resource}})
			continue
		}
		s.wg.Go(func() { s.discover(root, self, w) })
	}
}

// discover finds the version of w to watch and tells the actor. While
// the API server does not serve w, the kind counts as listed (there is
// nothing to wait for) and discovery is repeated every Recheck.
func (s *Source) discover(root *actor.RootContext, self *actor.PID, w watched) {
	var gvr schema.GroupVersionResource
	found := kubeclient.WaitServed(s.stop, kubeclient.Waits{Retry: s.cfg.Retry, Recheck: s.cfg.Recheck},
		func() (err error) { gvr, err = pick(s.cfg.Discovery, w); return err },
		func(err error) {
			s.cfg.Logger.Warn("Gateway API kind not served; checking again later", "kind", w.kind, "err", err, "every", s.cfg.Recheck)
			root.Send(self, &kindReady{kind: w.kind})
		},
		func(err error, in time.Duration) {
			s.cfg.Logger.Warn("Gateway API discovery failed; retrying", "kind", w.kind, "err", err, "in", in)
		})
	if found {
		root.Send(self, &discovered{w: w, gvr: gvr})
	}
}

// pick returns the preferred version of w that the API server serves.
func pick(d kubeclient.Discovery, w watched) (schema.GroupVersionResource, error) {
	for _, v := range w.versions {
		gv := schema.GroupVersion{Group: w.group, Version: v}
		list, err := d.ServerResourcesForGroupVersion(gv.String())
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return schema.GroupVersionResource{}, fmt.Errorf("discovering %s: %w", gv, err)
		}
		for _, r := range list.APIResources {
			if r.Name == w.resource {
				return gv.WithResource(w.resource), nil
			}
		}
	}
	return schema.GroupVersionResource{}, fmt.Errorf("%s.%s (the Gateway API CRDs are not installed): %w", w.resource, w.group, kubeclient.ErrNotServed)
}

// watch starts the informer of w and reports the kind listed once it
// has listed. Every change queues one flush.
func (s *Source) watch(ctx actor.Context, w watched, gvr schema.GroupVersionResource) {
	root, self := ctx.ActorSystem().Root, ctx.Self()
	resource := s.cfg.Client.Resource(gvr)
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return resource.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return resource.Watch(ctx, o)
		},
	}, s.cfg.Client)
	inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
	report := func(u *unstructured.Unstructured, err error) {
		s.cfg.Logger.Warn("object not answered: it does not convert", "kind", w.kind, "namespace", u.GetNamespace(), "name", u.GetName(), "err", err)
	}
	if err := inf.SetTransform(transform(w.convert, report)); err != nil {
		panic(fmt.Sprintf("gateway source: setting the transform of a new informer: %v", err))
	}
	inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		s.cfg.Logger.Warn("watch failed; serving the last known state and retrying", "kind", w.kind, "err", err)
	})
	changed := func() {
		if s.dirty.CompareAndSwap(false, true) {
			root.Send(self, &flush{})
		}
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { changed() },
		UpdateFunc: func(old, cur any) { changed() },
		DeleteFunc: func(any) { changed() },
	})
	if err != nil {
		panic(fmt.Sprintf("gateway source: adding a handler to a new informer: %v", err))
	}
	s.informers = append(s.informers, inf)
	s.cfg.Logger.Info("watching", "kind", w.kind, "version", gvr.Version)
	s.wg.Go(func() { inf.Run(s.stop) })
	s.wg.Go(func() {
		if cache.WaitForCacheSync(s.stop, reg.HasSynced) {
			root.Send(self, &kindReady{kind: w.kind})
		}
	})
}

// onFlush builds every zone from the caches and sends those that
// changed.
func (s *Source) onFlush(ctx actor.Context) {
	s.dirty.Store(false) // changes from here on queue another flush
	objs := &Objects{}
	for _, inf := range s.informers {
		if err := collect(objs, inf.GetStore().List()); err != nil {
			s.cfg.Logger.Error("gateway source: unexpected cache content", "err", err)
		}
	}
	var changes []model.Change
	for _, o := range s.cfg.Zones {
		origin := zone.Fqdn(o)
		prev := s.served[origin]
		serial := uint32(time.Now().Unix())
		if prev != nil && int32(serial-prev.zone.Serial) <= 0 {
			serial = prev.zone.Serial + 1 // RFC 1982: every change a higher serial
		}
		z, err := Build(s.cfg.Settings, origin, serial, objs)
		if err != nil {
			s.cfg.Logger.Error("gateway zone not built", "zone", origin, "err", err)
			continue
		}
		d := digest(z)
		if prev != nil && prev.digest == d {
			continue
		}
		s.served[origin] = &served{zone: z, digest: d}
		s.cfg.Logger.Info("gateway zone built", "zone", origin, "serial", z.Serial, "records", len(z.Records))
		changes = append(changes, change(z))
	}
	if len(changes) > 0 {
		ctx.Send(s.cfg.Manager, &zonemanager.Apply{Source: SourceName, Changes: changes})
	}
}

// digest is the content of z but its SOA, to tell whether it changed.
func digest(z *zone.FileZone) string {
	lines := make([]string, 0, len(z.Records))
	for _, rr := range z.Records[1:] {
		lines = append(lines, rr.String())
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// change is the upsert of a zone: a zone file's kind, keyed by origin.
func change(z *zone.FileZone) model.Change {
	return model.Change{Key: model.Key{Kind: model.KindZoneFile, Name: z.Origin}, Object: z}
}
