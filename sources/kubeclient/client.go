// Package kubeclient is what every part of the process that talks to the
// Kubernetes API shares: the REST configuration (kubeconfig and context,
// or in-cluster), typed REST clients for core/v1 and discovery.k8s.io/v1
// with their request limits, the dynamic client and discovery custom
// resources are read with, the wait for a custom resource to be served,
// and the replicas' own uses of the API: the gossip key and the
// node-local credential Secrets, the peers and node-pod watches, and a
// node's locality.
package kubeclient

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const protobuf = "application/vnd.kubernetes.protobuf"

// RESTConfig connects with kubeconfig, or with the pod's service account
// when kubeconfig is empty. A non-empty kubeContext is used in place of
// the kubeconfig's current context. Built-in kinds travel as protobuf,
// which is smaller and cheaper to decode than JSON; NewDynamic, for
// custom resources, which have no protobuf form, switches its copy to JSON.
func RESTConfig(kubeconfig, kubeContext, userAgent string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		if kubeContext != "" {
			return nil, fmt.Errorf("kubernetes.context needs kubernetes.kubeconfig")
		}
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("kubernetes.kubeconfig is empty and not running in a cluster: %w", err)
		}
	} else {
		cfg, err = kubeconfigREST(kubeconfig, kubeContext)
		if err != nil {
			return nil, err
		}
	}
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = protobuf
	cfg.AcceptContentTypes = protobuf + ",application/json"
	cfg.UserAgent = userAgent
	return cfg, nil
}

// kubeconfigREST reads the file at kubeconfig for kubeContext, or for its
// current context when kubeContext is empty. A context the file lacks is
// reported here, at start-up, naming the key to fix; client-go would say
// only "context was not found".
func kubeconfigREST(kubeconfig, kubeContext string) (*rest.Config, error) {
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	if kubeContext != "" {
		raw, err := cc.RawConfig()
		if err != nil {
			return nil, fmt.Errorf("kubernetes.kubeconfig: %w", err)
		}
		if _, ok := raw.Contexts[kubeContext]; !ok {
			return nil, fmt.Errorf("kubernetes.context %q: no such context in %s", kubeContext, kubeconfig)
		}
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		if kubeContext != "" {
			return nil, fmt.Errorf("kubernetes.kubeconfig, context %q: %w", kubeContext, err)
		}
		return nil, fmt.Errorf("kubernetes.kubeconfig: %w", err)
	}
	return cfg, nil
}

// Client reads the two API groups the Kubernetes source watches, core/v1 and
// discovery.k8s.io/v1, through REST clients whose scheme holds those
// groups only. client-go's generated clientset registers every built-in
// API group when the process starts, which costs each replica about
// 9 MB of resident memory for kinds it never reads.
type Client struct {
	core, discovery rest.Interface
}

// NewClient returns a client for kubeconfig (in-cluster when empty) and
// its current context.
func NewClient(kubeconfig, userAgent string) (*Client, error) {
	return NewClientContext(kubeconfig, "", userAgent)
}

// NewClientContext returns a client for kubeconfig (in-cluster when
// empty) and kubeContext, or the kubeconfig's current context when
// kubeContext is empty.
func NewClientContext(kubeconfig, kubeContext, userAgent string) (*Client, error) {
	cfg, err := RESTConfig(kubeconfig, kubeContext, userAgent)
	if err != nil {
		return nil, err
	}
	return NewClientForConfig(cfg)
}

// NewClientForConfig returns a client for cfg.
func NewClientForConfig(cfg *rest.Config) (*Client, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, discoveryv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("kubernetes: scheme: %w", err)
		}
	}
	// Status and the other unversioned meta kinds, as client-go's scheme has.
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	codecs := serializer.NewCodecFactory(scheme).WithoutConversion()
	restFor := func(gv schema.GroupVersion, apiPath string) (rest.Interface, error) {
		c := rest.CopyConfig(cfg)
		c.GroupVersion, c.APIPath, c.NegotiatedSerializer = &gv, apiPath, codecs
		if c.UserAgent == "" {
			c.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		rc, err := rest.RESTClientFor(c)
		if err != nil {
			return nil, fmt.Errorf("kubernetes: %s client: %w", gv, err)
		}
		return rc, nil
	}
	core, err := restFor(corev1.SchemeGroupVersion, "/api")
	if err != nil {
		return nil, err
	}
	disc, err := restFor(discoveryv1.SchemeGroupVersion, "/apis")
	if err != nil {
		return nil, err
	}
	return &Client{core: core, discovery: disc}, nil
}

// CoreV1 is the REST client of core/v1.
func (c *Client) CoreV1() rest.Interface { return c.core }

// DiscoveryV1 is the REST client of discovery.k8s.io/v1.
func (c *Client) DiscoveryV1() rest.Interface { return c.discovery }
