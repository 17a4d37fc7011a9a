// Package registry lists the sources a replica can run. Adding a source
// is one line here; the node starts the enabled ones in this order, so a
// source that needs another's actor (sources.Running) comes after it.
package registry

import (
	"github.com/shardns/shardns/sources"
	"github.com/shardns/shardns/sources/gateway"
	"github.com/shardns/shardns/sources/istio"
	"github.com/shardns/shardns/sources/kubernetes"
	"github.com/shardns/shardns/sources/manifest"
	"github.com/shardns/shardns/sources/multicluster"
	"github.com/shardns/shardns/sources/zonefile"
)

// Sources are every source, in start order.
var Sources = []sources.Spec{
	manifest.Spec,
	zonefile.Spec,
	kubernetes.Spec,
	istio.Spec,
	multicluster.Spec,
	gateway.Spec,
}
