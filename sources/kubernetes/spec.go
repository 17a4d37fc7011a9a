package kubernetes

import (
	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/sources"
	"github.com/shardns/shardns/sources/kubeclient"
)

// Spec runs the source when kubernetes.enabled. A kubeconfig that does
// not connect, or a selector that does not parse, stops the
// configuration from starting.
var Spec = sources.Spec{
	Name: SourceName,
	Resources: []schema.GroupResource{{Resource: "services"}, {Resource: "namespaces"}, {Resource: "pods"},
		{Group: "discovery.k8s.io", Resource: "endpointslices"}},
	RBAC: []sources.Rule{
		// Services and their EndpointSlices: the records of <svc>.<ns>.svc.
		// Namespaces: NXDOMAIN versus NODATA, and kubernetes.namespaceSelector.
		// Pods: kubernetes.pods: verified and kubernetes.endpointPodNames.
		{APIGroups: []string{""}, Resources: []string{"services", "namespaces", "pods"}, Verbs: sources.ReadOnly},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: sources.ReadOnly},
	},
	Watcher: true,
	Enabled: func(cfg *config.Config) bool { return cfg.Kubernetes.Enabled },
	Build:   build,
}

func build(d sources.Deps) (sources.Start, error) {
	k, m := d.Config.Kubernetes, d.Metrics.Kubernetes
	client, err := kubeclient.ForConfig(k, d.UserAgent)
	if err != nil {
		return nil, err
	}
	cfg := Config{Client: client, Namespaces: k.Namespaces, NamespaceSelector: k.NamespaceSelector,
		LabelSelector: k.LabelSelector, Pods: k.Pods == "verified", NoEndpoints: k.NoEndpoints,
		NoSharding: !k.Sharded(), PodsEverywhere: d.Config.Autopath.Enabled,
		Events: m.Events, ShardedWatch: m.ShardedWatch, Skipped: m.Skipped,
		Interest: d.Interest, Listing: d.Listing, Logger: d.Logger.With("source", SourceName)}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return func(r sources.Running) *actor.Props {
		cfg.Manager = r.Manager
		return NewProps(cfg)
	}, nil
}
