package kubeobj

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LastChangeTriggerTime is the annotation the EndpointSlice controller
// writes on each slice it changes: when the change of a pod or a Service
// that made it change the slice happened, in RFC 3339 with nanoseconds.
// It is where the DNS programming latency SLI of Kubernetes' scalability
// SIG starts, for kube-proxy and CoreDNS alike.
const LastChangeTriggerTime = corev1.EndpointsLastChangeTriggerTime

// RecentChange bounds how far from now a change time may lie to be taken
// as the time of an object's add. An add of an object created or changed
// longer ago is no fresh change: a list after a watch that was down, a
// namespace that came into view. Its age would measure the outage, not
// how fast DNS follows the API. It also bounds how far ahead of this
// node's clock any change time may lie: a garbage annotation (or a clock
// off by more) measures nothing.
const RecentChange = time.Minute

// Changed is when an object last changed in the API as its metadata says
// it, and what said it: Unix nanoseconds, 0 when unknown, the lowest bit
// set when the time is that of the change itself (a slice's
// LastChangeTriggerTime) and clear when it is the object's creation. It
// is eight bytes, not a time.Time's twenty-four, because the sources keep
// one in the cache entry of every object they watch: the entry is all
// that is left of the API object when its event reaches the handler. The
// bit costs a nanosecond of resolution, which no latency notices.
type Changed int64

// ChangedOf reads when m last changed. With annotated (EndpointSlices),
// the slice's LastChangeTriggerTime when it has one: an annotation that
// does not parse says the time is unknown, and no guess replaces it.
// Otherwise m's creationTimestamp, which is a change time only for an
// add. creationTimestamp has a resolution of a second, so latencies
// measured from it read up to a second long.
func ChangedOf(m metav1.Object, annotated bool) Changed {
	if annotated {
		if v, ok := m.GetAnnotations()[LastChangeTriggerTime]; ok {
			t, err := time.Parse(time.RFC3339Nano, v)
			if c := changedAt(t); err == nil && c != 0 {
				return c | 1
			}
			return 0
		}
	}
	return changedAt(m.GetCreationTimestamp().Time)
}

// changedAt is t as a Changed of a creation; times a Unix nanosecond
// count cannot hold (before 1678, after 2261) are unknown.
func changedAt(t time.Time) Changed {
	if t.IsZero() || t.Year() < 1678 || t.Year() > 2261 {
		return 0
	}
	return Changed(t.UnixNano()) &^ 1
}

// own reports whether c is the time of the change itself.
func (c Changed) own() bool { return c&1 == 1 }

// Time is c as a time; zero when unknown.
func (c Changed) Time() time.Time {
	if c == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(c&^1))
}

// OnAdd returns the trigger of an add event of an object that changed at
// c: zero for an add of the initial list (or a replay of the cache),
// which is no change at all, and for a change that is not recent.
func (c Changed) OnAdd(initial bool, now time.Time) time.Time {
	if initial || !c.within(now, RecentChange) {
		return time.Time{}
	}
	return c.Time()
}

// OnUpdate returns the trigger of an update from an object that changed
// at old to one that changed at c: c when it is the change's own time
// and it moved; zero for a creation time (an update is no creation), a
// time that did not move (a change the slice controller did not make)
// and one ahead of now by more than RecentChange. A moved time is taken
// however old it is: the update is a change, and its age is how long DNS
// served the previous version.
func (c Changed) OnUpdate(old Changed, now time.Time) time.Time {
	if !c.own() || c == old || c.Time().Sub(now) > RecentChange {
		return time.Time{}
	}
	return c.Time()
}

// within reports whether c is known and at most d from now, either way.
func (c Changed) within(now time.Time, d time.Duration) bool {
	if c == 0 {
		return false
	}
	age := now.Sub(c.Time())
	return age <= d && age >= -d
}
