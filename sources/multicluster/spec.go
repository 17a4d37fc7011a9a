package multicluster

import (
	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/sources"
	"github.com/shardns/shardns/sources/kubeclient"
)

// Spec runs the source when kubernetes.enabled and kubernetes.multicluster
// names a zone. The Kubernetes source (the Watcher) watches its kinds.
var Spec = sources.Spec{
	Name:      SourceName,
	Resources: []schema.GroupResource{ServiceImports.GroupResource(), EndpointSlices.GroupResource()},
	// A rule on a group the cluster does not serve is harmless.
	RBAC: []sources.Rule{
		{APIGroups: []string{ServiceImports.Group}, Resources: []string{ServiceImports.Resource}, Verbs: sources.ReadOnly},
		{APIGroups: []string{EndpointSlices.Group}, Resources: []string{EndpointSlices.Resource}, Verbs: sources.ReadOnly},
	},
	Enabled: func(cfg *config.Config) bool {
		return cfg.Kubernetes.Enabled && len(cfg.Kubernetes.Multicluster) > 0
	},
	Build: func(d sources.Deps) (sources.Start, error) {
		k := d.Config.Kubernetes
		client, disc, err := kubeclient.NewDynamic(k.Kubeconfig, k.Context, d.UserAgent)
		if err != nil {
			return nil, err
		}
		cfg := Config{Client: client, Discovery: disc, Namespaces: k.Namespaces,
			LabelSelector: k.LabelSelector, Logger: d.Logger.With("source", SourceName)}
		return func(r sources.Running) *actor.Props {
			cfg.Manager, cfg.Kubernetes = r.Manager, r.Watcher
			return NewProps(cfg)
		}, nil
	},
}
