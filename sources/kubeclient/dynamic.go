package kubeclient

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// Discovery lists the resources an API server serves for one group
// version. client-go's discovery client has this method; the sources do
// not use that client, whose package registers every built-in API group
// in the process (about 9 MB of resident memory) to read this one list.
type Discovery interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// NewDynamic returns the dynamic client and the discovery custom
// resources are read with, connecting with kubeconfig (in-cluster when
// empty) and kubeContext (the kubeconfig's current context when empty),
// as NewClientContext does. Custom resources travel as JSON.
func NewDynamic(kubeconfig, kubeContext, userAgent string) (dynamic.Interface, Discovery, error) {
	cfg, err := RESTConfig(kubeconfig, kubeContext, userAgent)
	if err != nil {
		return nil, nil, err
	}
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

// discoveryTimeout bounds one discovery request, as client-go's discovery
// client does, so an API server that accepts and never answers does not
// stall the source.
const discoveryTimeout = 32 * time.Second

// restDiscovery reads /apis/<group>/<version>. A group version the server
// does not serve is a NotFound error, as from client-go's discovery.
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
