package istio

import (
	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/sources"
	"github.com/shardns/shardns/sources/kubeclient"
)

// Spec runs the source when istio.enabled. It connects as the
// Kubernetes source does (kubernetes.kubeconfig and kubernetes.context).
var Spec = sources.Spec{
	Name:      SourceName,
	Resources: []schema.GroupResource{{Group: Group, Resource: Resource}},
	// A rule on a group the cluster does not serve is harmless.
	RBAC:    []sources.Rule{{APIGroups: []string{Group}, Resources: []string{Resource}, Verbs: sources.ReadOnly}},
	Enabled: func(cfg *config.Config) bool { return cfg.Istio.Enabled },
	Build: func(d sources.Deps) (sources.Start, error) {
		k := d.Config.Kubernetes
		client, disc, err := kubeclient.NewDynamic(k.Kubeconfig, k.Context, d.UserAgent)
		if err != nil {
			return nil, err
		}
		cfg := Config{Client: client, Discovery: disc, Logger: d.Logger.With("source", SourceName)}
		return func(r sources.Running) *actor.Props {
			cfg.Manager = r.Manager
			return NewProps(cfg)
		}, nil
	},
}
