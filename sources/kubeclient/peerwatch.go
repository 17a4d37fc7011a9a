package kubeclient

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"sync"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/shardns/shardns/sources/kubeobj"
)

// PeerWatch follows the addresses of the pods behind one or more Services
// ("namespace/name"), from their EndpointSlices, ready or not: the
// addresses that may join the ring. Only whoever may change those
// Services' selectors and pods (the namespace's administrators) can add
// an address.
type PeerWatch struct {
	stop context.CancelFunc
	wg   sync.WaitGroup
	// synced reports whether every Service's slices have been listed.
	synced []cache.InformerSynced
}

// Peers are the endpoints of the peers Services.
type Peers struct {
	// All are the addresses of every Service's endpoints.
	All []netip.Addr
	// Replicas are the addresses of the first Service's endpoints (the
	// replicas' joinService), each with the names its pod may use in the
	// ring: its pod name and hostname (none: the endpoint names no pod).
	Replicas map[netip.Addr][]string
}

// WatchPeers starts watching services and calls onChange with the
// addresses they list, at the first list and after each change. onChange
// runs on the watch's goroutines, one call at a time.
func WatchPeers(client *Client, services []string, logger *slog.Logger, onChange func(Peers)) *PeerWatch {
	ctx, stop := context.WithCancel(context.Background())
	w := &PeerWatch{stop: stop}
	var mu sync.Mutex
	stores := make([]cache.Store, len(services))
	publish := func() {
		mu.Lock()
		defer mu.Unlock()
		seen := map[netip.Addr]bool{}
		peers := Peers{Replicas: map[netip.Addr][]string{}}
		for i, st := range stores {
			if st == nil {
				continue
			}
			for _, obj := range st.List() {
				for _, ep := range obj.(*discoveryv1.EndpointSlice).Endpoints {
					for _, a := range endpointAddrs(ep) {
						if !seen[a] {
							seen[a] = true
							peers.All = append(peers.All, a)
						}
						if i == 0 {
							peers.Replicas[a] = append(peers.Replicas[a], endpointNames(ep)...)
						}
					}
				}
			}
		}
		onChange(peers)
	}
	for i, svc := range services {
		ns, name, _ := strings.Cut(svc, "/")
		lw := cache.NewFilteredListWatchFromClient(client.discovery, "endpointslices", ns, func(o *metav1.ListOptions) {
			o.LabelSelector = kubeobj.ServiceNameLabel + "=" + name
		})
		changed := func(any) { publish() }
		inf := cache.NewSharedIndexInformer(lw, &discoveryv1.EndpointSlice{}, 0, cache.Indexers{})
		_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
			logger.Warn("watching the peers Service failed; keeping the last known peers and retrying",
				"service", svc, "err", err)
		})
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: changed, DeleteFunc: changed,
			UpdateFunc: func(_, obj any) { publish() },
		})
		if err != nil {
			panic(fmt.Sprintf("kubernetes: adding a handler to a new informer: %v", err))
		}
		mu.Lock()
		stores[i] = inf.GetStore()
		mu.Unlock()
		w.synced = append(w.synced, reg.HasSynced)
		w.wg.Go(func() { inf.Run(ctx.Done()) })
	}
	return w
}

// WaitSynced waits until every Service has been listed once, or ctx ends.
func (w *PeerWatch) WaitSynced(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), w.synced...)
}

// Stop ends the watch and waits for it.
func (w *PeerWatch) Stop() {
	w.stop()
	w.wg.Wait()
}

// endpointAddrs are the valid IP addresses of an endpoint.
func endpointAddrs(ep discoveryv1.Endpoint) []netip.Addr {
	var out []netip.Addr
	for _, a := range ep.Addresses {
		if ip, err := netip.ParseAddr(a); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

// endpointNames are the names the pod behind an endpoint goes by: its
// name (a StatefulSet pod's hostname, the default node name) and the
// hostname it sets.
func endpointNames(ep discoveryv1.Endpoint) []string {
	var names []string
	if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" && ep.TargetRef.Name != "" {
		names = append(names, ep.TargetRef.Name)
	}
	if ep.Hostname != nil && *ep.Hostname != "" {
		names = append(names, *ep.Hostname)
	}
	return names
}
