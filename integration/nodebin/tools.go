//go:build tools

// Package nodebin pins the Kubernetes binaries that the node tier
// (integration/kubenode) runs: kube-apiserver, kube-controller-manager,
// kube-scheduler, kubelet and kube-proxy, all of one version. It is a
// separate module so that k8s.io/kubernetes and its replace lines stay out
// of shardns's own go.mod, and a separate one from integration/apiserver,
// whose kube-apiserver (the integration tier's) may be newer than the
// kubelet this tier runs. integration/scripts/build-node.sh builds them
// once into a cache folder.
package nodebin

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-proxy/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/cmd/kubelet/app"
)
