package query

import "github.com/shardns/shardns/zone"

// Mesh hosts exported to some namespaces only (zone/meshprivate.go) are
// answered by a node-local process to the pods of those namespaces: it
// knows each pod of its node by address (MeshClients). A question from a
// pod whose namespace has such hosts skips every answer cached by name
// (the fast paths, the owners' cache) and is answered with its
// namespace; the owners' answer to it is not cached. Other clients are
// answered as before.

// meshNamespace is the namespace of the client of t when it has mesh
// hosts of its own; "" otherwise.
func (h *Handler) meshNamespace(t Transport) string {
	if h.MeshClients == nil || !t.Client.IsValid() {
		return ""
	}
	ns, ok := h.MeshClients.Namespace(t.Client.Addr().Unmap())
	if !ok || !h.Zones.Directory().HasPrivateMesh(ns) {
		return ""
	}
	return ns
}

// privateTo is the namespace an owner is asked for: the client's, when
// resp is that namespace's own answer.
func privateTo(x *exchange, resp zone.Response) string {
	if resp.Private {
		return x.meshNS
	}
	return ""
}
