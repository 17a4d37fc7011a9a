//go:build tools

// Package apiserver pins the kube-apiserver that the integration tier runs.
// It is a separate module so that k8s.io/kubernetes and its replace lines
// stay out of shardns's own go.mod. integration/scripts/build-apiserver.sh
// builds it once into a cache folder.
package apiserver

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
)
