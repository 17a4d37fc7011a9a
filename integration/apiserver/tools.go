//go:build tools

// Package apiserver pins the Kubernetes binaries that the integration tier
// runs. It is a separate module so that k8s.io/kubernetes and its replace
// lines stay out of shardns's own go.mod. integration/scripts/build-apiserver.sh
// builds kube-apiserver once into a cache folder, and
// integration/scripts/build-node.sh the node's binaries (the rest of a
// control plane, kubelet and kube-proxy) into the same folder.
package apiserver

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	_ "k8s.io/kubernetes/cmd/kube-proxy/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "k8s.io/kubernetes/cmd/kubelet/app"
)
