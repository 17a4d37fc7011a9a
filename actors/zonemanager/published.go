package zonemanager

import (
	"slices"
	"time"
)

// Published is what a zone actor reports after it published a snapshot
// whose content changed: the owner tells the processes that cached its
// answers which names to drop. A republish of the same content (a
// repack) reports nothing.
type Published struct {
	Zone string // zone key
	// Labels are the changed labels right under the zone, lower-case:
	// the names of the services a service zone built again. Every name
	// at or under label.Zone may have changed, and so may the names no
	// label picks out (the apex, wildcards).
	Labels []string
	// All says any name of the zone may have changed: a zone built whole
	// (a start, a rebuild, reverse, pod, mesh and file zones).
	All bool
	// Trigger is when the earliest change of the snapshot happened in
	// the API; zero when unknown.
	Trigger time.Time
}

// updatesLabels reports whether the next publish builds again only the
// touched services of a service zone, from the published snapshot.
func (z *zoneActor) updatesLabels() bool {
	if z.fileZone != nil || z.mesh || z.pods || z.reverse || z.wholeZone {
		return false
	}
	prev := z.slot.Load()
	return prev != nil && prev.IsServiceZone()
}

// whatChanged is what the next publish changes, taken before publish
// forgets what was touched; changed is false when no name changes.
func (z *zoneActor) whatChanged() (p Published, changed bool) {
	p = Published{Zone: z.key, Trigger: z.trigger}
	if !z.updatesLabels() || z.changedAll {
		p.All = true
		return p, true
	}
	for label := range z.touched {
		p.Labels = append(p.Labels, label)
	}
	slices.Sort(p.Labels)
	return p, len(p.Labels) > 0
}

// report tells the Observer what the publish just done changed, and starts
// the next one's record.
func (z *zoneActor) report(p Published, changed bool) {
	z.trigger, z.changedAll = time.Time{}, false
	if changed {
		z.observer.Published(p)
	}
}

// noteTrigger keeps the earliest known trigger of the changes applied
// since the last publish.
func (z *zoneActor) noteTrigger(t time.Time) {
	if !t.IsZero() && (z.trigger.IsZero() || t.Before(z.trigger)) {
		z.trigger = t
	}
}
