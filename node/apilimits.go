package node

import (
	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/sources/kubeclient"
)

// kubeClient connects to the API server of k with its request limits
// (kubernetes.apiserverQPS, apiserverBurst, apiserverMaxInflight).
func kubeClient(k config.KubernetesConfig) (*kubeclient.Client, error) {
	return kubeclient.ForConfig(k, "shardns/"+Version)
}
