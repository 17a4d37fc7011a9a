package gateway

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/sources"
	"github.com/shardns/shardns/sources/kubeclient"
)

// Spec runs the source when gateway.enabled. It connects with
// gateway.kubeconfig and gateway.context (k8s_gateway's kubeconfig
// option), in-cluster when they are empty.
var Spec = sources.Spec{
	Name: SourceName,
	Resources: []schema.GroupResource{
		{Group: gatewayGroup, Resource: "gateways"}, {Group: gatewayGroup, Resource: "httproutes"},
		{Group: gatewayGroup, Resource: "tlsroutes"}, {Group: gatewayGroup, Resource: "grpcroutes"},
		{Group: "networking.k8s.io", Resource: "ingresses"}, {Group: "", Resource: "services"},
	},
	// A rule on a group the cluster does not serve is harmless.
	RBAC: []sources.Rule{
		{APIGroups: []string{gatewayGroup}, Resources: []string{"gateways", "httproutes", "tlsroutes", "grpcroutes"}, Verbs: sources.ReadOnly},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"ingresses"}, Verbs: sources.ReadOnly},
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: sources.ReadOnly},
	},
	Enabled: func(cfg *config.Config) bool { return cfg.Gateway.Enabled },
	Build: func(d sources.Deps) (sources.Start, error) {
		g := d.Config.Gateway
		client, disc, err := kubeclient.NewDynamic(g.Kubeconfig, g.Context, d.UserAgent)
		if err != nil {
			return nil, fmt.Errorf("gateway (gateway.kubeconfig %q): %w", g.Kubeconfig, err)
		}
		cfg := Config{Client: client, Discovery: disc, Zones: g.Zones, Logger: d.Logger.With("source", SourceName),
			Settings: Settings{Resources: g.Resources, TTL: uint32(g.TTL), Apex: g.Apex, Secondary: g.Secondary}}
		return func(r sources.Running) *actor.Props {
			cfg.Manager = r.Manager
			return NewProps(cfg)
		}, nil
	},
}
