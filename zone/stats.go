package zone

// Records counts the records this snapshot holds (answer and additional
// records of every name), for the records-held metric.
func (s *Snapshot) Records() int {
	n := s.ptrRecords
	if s.File != nil {
		return len(s.File.Records)
	}
	if w, ok := s.wildcardRecords(); ok {
		n += w.size()
	}
	for _, at := range s.nodes {
		n += s.recordsAt(at).size()
	}
	for _, p := range s.parts {
		for i := range p.nameCount() {
			n += decodeRecords(p.data[p.name(i).at:], nil, s.ttl).size()
		}
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
