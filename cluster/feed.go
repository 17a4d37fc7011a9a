package cluster

// A node-local process holds no replica key, so it does not gossip: it
// asks the replicas for the ring (node's ring feed). These decide whom.

// AskOrder is the order in which a node-local process asks the members
// of the ring it knows for the ring: last, the replica that answered
// last, then the owners, then the others.
func AskOrder(members []Candidate, last string) []string {
	var owners, others []string
	for _, m := range members {
		switch {
		case m.Remote == last:
		case m.Role == RoleOwner:
			owners = append(owners, m.Remote)
		default:
			others = append(others, m.Remote)
		}
	}
	var out []string
	if last != "" {
		out = append(out, last)
	}
	return append(append(out, owners...), others...)
}

// Unreached lists the remotes of the owners that have not answered yet:
// a node-local process asks each once, so the connection to every owner
// is up before a query needs it.
func Unreached(members []Candidate, reached map[string]bool) []string {
	var out []string
	for _, m := range members {
		if m.Role == RoleOwner && !reached[m.Remote] {
			out = append(out, m.Remote)
		}
	}
	return out
}
