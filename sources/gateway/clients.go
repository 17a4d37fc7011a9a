package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Discovery lists the resources an API server serves for one group
// version, as client-go's discovery client does, without registering
// every built-in API group in the process.
type Discovery interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// NewClients connects with kubeconfig (in-cluster when empty) and
// kubeContext (the kubeconfig's current context when empty). Objects
// travel as JSON: the dynamic client reads no protobuf.
func NewClients(kubeconfig, kubeContext, userAgent string) (dynamic.Interface, Discovery, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		if kubeContext != "" {
			return nil, nil, fmt.Errorf("gateway.context needs gateway.kubeconfig")
		}
		if cfg, err = rest.InClusterConfig(); err != nil {
			return nil, nil, fmt.Errorf("gateway.kubeconfig is empty and not running in a cluster: %w", err)
		}
	} else {
		cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
			&clientcmd.ConfigOverrides{CurrentContext: kubeContext})
		if cfg, err = cc.ClientConfig(); err != nil {
			return nil, nil, fmt.Errorf("gateway.kubeconfig %s: %w", kubeconfig, err)
		}
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = userAgent
	cfg.ContentType = "application/json"
	cfg.AcceptContentTypes = "application/json"
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	rc, err := rest.UnversionedRESTClientFor(dynamic.ConfigFor(cfg))
	if err != nil {
		return nil, nil, err
	}
	return client, restDiscovery{rc}, nil
}

// discoveryTimeout bounds one discovery request, so an API server that
// accepts and never answers does not stall the source.
const discoveryTimeout = 32 * time.Second

// restDiscovery reads /apis/<group>/<version>. A group version the server
// does not serve is a NotFound error.
type restDiscovery struct{ rc rest.Interface }

func (d restDiscovery) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	ctx, cancel := context.WithTimeout(context.Background(), discoveryTimeout)
	defer cancel()
	body, err := d.rc.Get().AbsPath("/apis", gv).Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	list := &metav1.APIResourceList{}
	if err := json.Unmarshal(body, list); err != nil {
		return nil, fmt.Errorf("discovery of %s: %w", gv, err)
	}
	return list, nil
}
