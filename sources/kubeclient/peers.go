package kubeclient

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardns/shardns/sources/kubeobj"
)

// PeerSeeds returns a function listing the gossip addresses of the pods
// behind a headless Service ("namespace/name"), read from its
// EndpointSlices through the API: the cluster DNS cannot look itself up.
// Not-ready pods count too: replicas starting together must find each
// other before any of them is ready.
func PeerSeeds(client *Client, service string, port int) func(ctx context.Context) ([]string, error) {
	return peerAddrs(client, service, func(discoveryv1.EndpointSlice) int { return port })
}

// PeerRemotes returns a function listing the actor remote addresses of
// the pods behind a Service ("namespace/name"), as PeerSeeds does, at the
// port its EndpointSlices name "tcp-remote" or "remote", or else at
// fallbackPort: how a node-local process, which does not gossip, finds
// the replicas to read the ring from.
func PeerRemotes(client *Client, service string, fallbackPort int) func(ctx context.Context) ([]string, error) {
	return peerAddrs(client, service, func(sl discoveryv1.EndpointSlice) int {
		for _, p := range sl.Ports {
			if p.Name != nil && (*p.Name == "tcp-remote" || *p.Name == "remote") && p.Port != nil {
				return int(*p.Port)
			}
		}
		return fallbackPort
	})
}

// peerAddrs lists the endpoints of service's slices, each at the port
// portOf gives its slice.
func peerAddrs(client *Client, service string, portOf func(discoveryv1.EndpointSlice) int) func(ctx context.Context) ([]string, error) {
	ns, name, _ := strings.Cut(service, "/")
	return func(ctx context.Context) ([]string, error) {
		opts := metav1.ListOptions{LabelSelector: kubeobj.ServiceNameLabel + "=" + name}
		list := &discoveryv1.EndpointSliceList{}
		err := client.discovery.Get().Namespace(ns).Resource("endpointslices").
			VersionedParams(&opts, metav1.ParameterCodec).Do(ctx).Into(list)
		if err != nil {
			return nil, fmt.Errorf("cluster.joinService %s: %w", service, err)
		}
		var out []string
		for _, sl := range list.Items {
			port := strconv.Itoa(portOf(sl))
			for _, ep := range sl.Endpoints {
				for _, a := range ep.Addresses {
					out = append(out, net.JoinHostPort(a, port))
				}
			}
		}
		return out, nil
	}
}
