package node

import (
	"github.com/shardns/shardns/config"
	kubesource "github.com/shardns/shardns/sources/kubernetes"
)

// kubeClient connects to the API server of k with its request limits
// (kubernetes.apiserverQPS, apiserverBurst, apiserverMaxInflight).
func kubeClient(k config.KubernetesConfig) (*kubesource.Client, error) {
	l := kubesource.Limits{QPS: float32(k.APIServerQPS), Burst: k.APIServerBurst, MaxInflight: k.APIServerMaxInflight}
	return kubesource.NewClientLimited(k.Kubeconfig, k.Context, "shardns/"+Version, l)
}
