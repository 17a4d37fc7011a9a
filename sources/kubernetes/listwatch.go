package kubernetes

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/shardns/shardns/sources/kubeclient"
)

// listWatch lists and watches resource (namespaces, services, pods or
// endpointslices) in every namespace, with tweak applied to the options;
// listing, when set, hears when its lists begin and end (toldListing);
// pages, when set, has a list asked for whole come a page at a time, each
// converted as it arrives (pagedLists).
func listWatch(c *kubeclient.Client, resource string, tweak func(*metav1.ListOptions), listing func(bool), pages *pageTransform) cache.ListerWatcher {
	rc := c.CoreV1()
	if resource == "endpointslices" {
		rc = c.DiscoveryV1()
	}
	if tweak == nil {
		tweak = func(*metav1.ListOptions) {}
	}
	// As client-go's generated informers: the client says whether it can
	// stream the initial list, else the reflector lists.
	return cache.ToListWatcherWithWatchListSemantics(
		toldListing(pagedLists(cache.NewFilteredListWatchFromClient(rc, resource, metav1.NamespaceAll, tweak), pages), listing), rc)
}
