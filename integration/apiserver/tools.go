//go:build tools

// Package apiserver pins the kube-apiserver that the integration tier
// (integration/kubeapi) runs. It is a separate module so that
// k8s.io/kubernetes and its replace lines stay out of shardns's own go.mod,
// and a separate one from integration/nodebin, which pins the node tier's
// older Kubernetes, so that this apiserver can be newer (for alpha features
// the tests use) than the kubelet the node tier runs on this host.
// integration/scripts/build-apiserver.sh builds it once into a cache folder.
package apiserver

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
)
