// Package kubernetes is the Kubernetes API source: it watches Services,
// EndpointSlices (discovery.k8s.io/v1), Namespaces and, with pods
// verified, Pods, converts them to model objects through sources/kubeobj
// and sends the changes to the zone manager, the same path the manifest
// source takes.
//
// Informer caches hold model objects, not API objects (see cached.go):
// the zones share them, so a large cluster costs little memory beyond its
// records. Updates that change nothing DNS serves are dropped before they
// reach an actor.
package kubernetes

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const protobuf = "application/vnd.kubernetes.protobuf"

// RESTConfig connects with kubeconfig, or with the pod's service account
// when kubeconfig is empty. Built-in kinds travel as protobuf, which is
// smaller and cheaper to decode than JSON; the Istio source, whose
// custom resources have no protobuf form, switches its copy to JSON.
func RESTConfig(kubeconfig, userAgent string) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("kubernetes.kubeconfig is empty and not running in a cluster: %w", err)
		}
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("kubernetes.kubeconfig: %w", err)
		}
	}
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = protobuf
	cfg.AcceptContentTypes = protobuf + ",application/json"
	cfg.UserAgent = userAgent
	return cfg, nil
}

// NewClient returns a clientset for kubeconfig (in-cluster when empty).
func NewClient(kubeconfig, userAgent string) (kubernetes.Interface, error) {
	cfg, err := RESTConfig(kubeconfig, userAgent)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}
