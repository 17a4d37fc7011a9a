package cluster

// Returned lists the actor remote addresses of the members that serve in
// next but did not in prev: absent from it (gossip had declared them dead
// or gone) or found down in it. A connection this member opened to one of
// them before it went away may be one whose packets were lost (a network
// partition): TCP keeps retransmitting on it and it carries nothing until
// it breaks, seconds later. The caller drops such connections so that the
// next question opens a fresh one. With no prev (the first ring) nothing
// was connected yet, and this member itself is never listed.
func Returned(prev, next *Ring) []string {
	if prev == nil || next == nil {
		return nil
	}
	var out []string
	for _, m := range next.Members {
		if m.Name == next.Self || m.Down || m.Remote == "" {
			continue
		}
		if was, ok := prev.byName[m.Name]; ok && !was.Down && was.Remote == m.Remote {
			continue
		}
		out = append(out, m.Remote)
	}
	return out
}
