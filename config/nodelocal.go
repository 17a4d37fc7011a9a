package config

// The AAAA policies of a node-local process.
const (
	// AAAAAnswer answers AAAA questions as any other.
	AAAAAnswer = "answer"
	// AAAANoData answers AAAA questions from client pods without an IPv6
	// address with NODATA, asking no one.
	AAAANoData = "nodata"
)

// NodeLocalConfig is what a node-local process knows of the pods of its
// own node, its clients: it watches them (a field selector on
// spec.nodeName, through kubernetes.kubeconfig) when autopath is enabled
// or the AAAA policy needs them, and no other Pod of the cluster.
type NodeLocalConfig struct {
	// NodeName is the node whose pods are the clients; empty: the
	// NODE_NAME environment variable, which the deploy/ manifests set from
	// spec.nodeName.
	NodeName string `json:"nodeName"`
	// AAAA is answer, or nodata: an AAAA question from a pod of this node
	// that has no IPv6 address gets NODATA at once, as CoreDNS's
	// `template ANY AAAA` idiom answers every client. Others are answered.
	AAAA string `json:"aaaa"`
	// MeshNamespaces answers the mesh hosts of ServiceEntries exported to
	// some namespaces only (exportTo "." or namespace names) to the pods
	// of this node in those namespaces, asking the owners with the pod's
	// namespace; the replicas answer them to no one. It needs this
	// node's pods.
	MeshNamespaces bool `json:"meshNamespaces"`
}

// WatchesClients reports whether a node-local process watches the pods
// of its node.
func (c *Config) WatchesClients() bool {
	return c.Mode == ModeNodeLocal && (c.Autopath.Enabled || c.NodeLocal.AAAA == AAAANoData || c.NodeLocal.MeshNamespaces)
}

func (c *Config) validateNodeLocalClients(bad func(key, format string, args ...any)) {
	n := &c.NodeLocal
	switch n.AAAA {
	case AAAAAnswer, AAAANoData:
	default:
		bad("nodeLocal.aaaa", "must be answer or nodata, got %q", n.AAAA)
	}
	if c.Mode != ModeNodeLocal && (n.AAAA != AAAAAnswer || n.NodeName != "" || n.MeshNamespaces) {
		bad("nodeLocal", "is read in mode: nodelocal only; a replica learns its clients from kubernetes.pods: verified")
	}
	if n.NodeName != "" && !ValidDomain(n.NodeName) {
		bad("nodeLocal.nodeName", "%q is not a node name", n.NodeName)
	}
}
