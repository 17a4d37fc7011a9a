package kubernetes

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/shardns/shardns/sources/kubeobj"
)

// PeerSeeds returns a function listing the gossip addresses of the pods
// behind a headless Service ("namespace/name"), read from its
// EndpointSlices through the API: the cluster DNS cannot look itself up.
// Not-ready pods count too: replicas starting together must find each
// other before any of them is ready.
func PeerSeeds(client kubernetes.Interface, service string, port int) func(ctx context.Context) ([]string, error) {
	ns, name, _ := strings.Cut(service, "/")
	return func(ctx context.Context) ([]string, error) {
		list, err := client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
			LabelSelector: kubeobj.ServiceNameLabel + "=" + name,
		})
		if err != nil {
			return nil, fmt.Errorf("cluster.joinService %s: %w", service, err)
		}
		var out []string
		for _, sl := range list.Items {
			for _, ep := range sl.Endpoints {
				for _, a := range ep.Addresses {
					out = append(out, net.JoinHostPort(a, strconv.Itoa(port)))
				}
			}
		}
		return out, nil
	}
}
