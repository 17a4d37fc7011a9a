package zone

// Records counts the records this snapshot holds (answer and additional
// records of every name), for the records-held metric.
func (s *Snapshot) Records() int {
	n := 0
	if w := s.wildcard; w != nil {
		n += len(w.a) + len(w.aaaa)
	}
	for _, nd := range s.nodes {
		n += len(nd.a) + len(nd.aaaa) + len(nd.srv) + len(nd.srvExtra) + len(nd.ptr) + len(nd.cnameRecords)
	}
	return n
}

// Served lists the zone keys whose snapshots are served from this table,
// with the snapshots.
func (t *Table) Served() map[string]*Snapshot {
	out := map[string]*Snapshot{}
	for key, slot := range *t.slots.Load() {
		if slot.loading.Load() {
			continue
		}
		if s := slot.Load(); s != nil {
			out[key] = s
		}
	}
	return out
}
