package kubeclient

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/shardns/shardns/zone"
)

// NodePodWatch follows the Pods of one node (a field selector on
// spec.nodeName, which the API server applies), so a node-local process
// knows its own clients without watching every Pod of the cluster.
type NodePodWatch struct {
	stop   context.CancelFunc
	wg     sync.WaitGroup
	synced cache.InformerSynced
}

// WatchNodePods starts watching the Pods of node and calls onChange with
// all of them, converted, at the first list and after each change.
// onChange runs on the watch's goroutine, one call at a time. A node has
// at most a few hundred pods, so each change hands over the whole list.
func WatchNodePods(client *Client, node string, logger *slog.Logger, onChange func([]zone.NodePod)) *NodePodWatch {
	ctx, stop := context.WithCancel(context.Background())
	w := &NodePodWatch{stop: stop}
	selector := fields.OneTermEqualSelector("spec.nodeName", node).String()
	lw := cache.NewFilteredListWatchFromClient(client.core, "pods", metav1.NamespaceAll, func(o *metav1.ListOptions) {
		o.FieldSelector = selector
	})
	inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
	// Only what the directory needs is kept of each Pod.
	_ = inf.SetTransform(func(obj any) (any, error) {
		if p, ok := obj.(*corev1.Pod); ok {
			return &nodePodEntry{pod: NodePod(p), resourceVersion: p.ResourceVersion}, nil
		}
		return obj, nil
	})
	_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		logger.Warn("watching this node's pods failed; keeping the last known clients and retrying",
			"node", node, "err", err)
	})
	store := inf.GetStore()
	var mu sync.Mutex
	publish := func() {
		mu.Lock()
		defer mu.Unlock()
		objs := store.List()
		pods := make([]zone.NodePod, 0, len(objs))
		for _, o := range objs {
			if e, ok := o.(*nodePodEntry); ok {
				pods = append(pods, e.pod)
			}
		}
		onChange(pods)
	}
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { publish() }, DeleteFunc: func(any) { publish() },
		UpdateFunc: func(old, obj any) {
			if !samePod(old, obj) {
				publish()
			}
		},
	})
	if err != nil {
		panic(fmt.Sprintf("kubernetes: adding a handler to a new informer: %v", err))
	}
	w.synced = reg.HasSynced
	w.wg.Go(func() { inf.Run(ctx.Done()) })
	return w
}

// NodePod converts a Pod to what a node's client directory holds. An
// address the API server should never have written is left out, never
// the pod.
func NodePod(p *corev1.Pod) zone.NodePod {
	out := zone.NodePod{Namespace: p.Namespace, Name: p.Name, HostNetwork: p.Spec.HostNetwork,
		Done: p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed}
	ips := p.Status.PodIPs
	if len(ips) == 0 && p.Status.PodIP != "" {
		ips = []corev1.PodIP{{IP: p.Status.PodIP}}
	}
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip.IP); err == nil && a.Zone() == "" {
			out.IPs = append(out.IPs, a.Unmap())
		}
	}
	return out
}

// nodePodEntry is what the informer stores of a Pod of the node.
type nodePodEntry struct {
	pod             zone.NodePod
	resourceVersion string
}

// GetObjectMeta lets the informer's key functions read the identity.
func (e *nodePodEntry) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: e.pod.Namespace, Name: e.pod.Name, ResourceVersion: e.resourceVersion}
}

// samePod reports updates that change nothing the directory holds
// (status conditions, container states, resyncs).
func samePod(old, obj any) bool {
	x, ok1 := old.(*nodePodEntry)
	y, ok2 := obj.(*nodePodEntry)
	if !ok1 || !ok2 {
		return false
	}
	a, b := x.pod, y.pod
	return a.Namespace == b.Namespace && a.Name == b.Name && a.HostNetwork == b.HostNetwork && a.Done == b.Done &&
		equalAddrs(a.IPs, b.IPs)
}

func equalAddrs(a, b []netip.Addr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// WaitSynced waits until the node's pods have been listed once, or ctx
// ends.
func (w *NodePodWatch) WaitSynced(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), w.synced)
}

// Stop ends the watch and waits for it.
func (w *NodePodWatch) Stop() {
	w.stop()
	w.wg.Wait()
}
