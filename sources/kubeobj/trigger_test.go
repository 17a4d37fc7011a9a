package kubeobj

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	created = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	now     = created.Add(10 * time.Second)
)

func objectMeta(annotation string) *metav1.ObjectMeta {
	m := &metav1.ObjectMeta{Name: "web-abc", CreationTimestamp: metav1.NewTime(created)}
	if annotation != "" {
		m.Annotations = map[string]string{LastChangeTriggerTime: annotation}
	}
	return m
}

// What an object's metadata says of its last change, as an add and as
// an update from a version that changed at the creation time.
func TestChangedOf(t *testing.T) {
	cases := []struct {
		name            string
		annotation      string
		annotated       bool
		onAdd, onUpdate time.Time
	}{
		{"the slice controller's time", "2026-03-01T10:00:03.123456Z", true,
			created.Add(3*time.Second + 123456*time.Microsecond), created.Add(3*time.Second + 123456*time.Microsecond)},
		{"RFC 3339 without fractions", "2026-03-01T11:00:04+01:00", true, created.Add(4 * time.Second), created.Add(4 * time.Second)},
		{"no annotation: the creation, for an add only", "", true, created, time.Time{}},
		{"not a slice: the annotation is not read", "2026-03-01T10:00:03Z", false, created, time.Time{}},
		{"malformed: unknown, not the creation", "yesterday", true, time.Time{}, time.Time{}},
		{"empty: unknown", " ", true, time.Time{}, time.Time{}},
		{"the zero time: unknown", "0001-01-01T00:00:00Z", true, time.Time{}, time.Time{}},
		{"past what nanoseconds hold: unknown", "9999-12-31T23:59:59Z", true, time.Time{}, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			changed := ChangedOf(objectMeta(c.annotation), c.annotated)
			if got := changed.OnAdd(false, now); !got.Equal(c.onAdd) {
				t.Errorf("add: trigger %v, want %v", got, c.onAdd)
			}
			before := ChangedOf(objectMeta(""), true)
			if got := changed.OnUpdate(before, now); !got.Equal(c.onUpdate) {
				t.Errorf("update: trigger %v, want %v", got, c.onUpdate)
			}
		})
	}
}

func TestChangedOnAdd(t *testing.T) {
	changed := ChangedOf(objectMeta(""), false)
	cases := []struct {
		name    string
		initial bool
		now     time.Time
		want    time.Time
	}{
		{"a new object", false, now, created},
		{"the initial list", true, now, time.Time{}},
		{"created before the last minute: a relist", false, created.Add(RecentChange + time.Second), time.Time{}},
		{"a clock a little behind", false, created.Add(-time.Second), created},
		{"a clock far behind", false, created.Add(-RecentChange - time.Second), time.Time{}},
	}
	for _, c := range cases {
		if got := changed.OnAdd(c.initial, c.now); !got.Equal(c.want) {
			t.Errorf("%s: trigger %v, want %v", c.name, got, c.want)
		}
	}
	if got := Changed(0).OnAdd(false, now); !got.IsZero() {
		t.Errorf("unknown: trigger %v, want none", got)
	}
}

func TestChangedOnUpdate(t *testing.T) {
	at := func(annotation string) Changed { return ChangedOf(objectMeta(annotation), true) }
	first, second := "2026-03-01T10:00:01Z", "2026-03-01T10:00:02.5Z"
	cases := []struct {
		name     string
		old, new Changed
		now      time.Time
		want     time.Time
	}{
		{"a new trigger time", at(first), at(second), now, created.Add(2500 * time.Millisecond)},
		{"the same trigger time: another writer's change", at(second), at(second), now, time.Time{}},
		{"the annotation cleared: the creation is no update's time", at(first), at(""), now, time.Time{}},
		{"an old change, late: its age is DNS's", at(first), at(second), now.Add(time.Hour), created.Add(2500 * time.Millisecond)},
		{"ahead of the clock beyond a minute", at(first), at(second), created.Add(-2 * RecentChange), time.Time{}},
		{"malformed", at(first), at("10:00"), now, time.Time{}},
	}
	for _, c := range cases {
		if got := c.new.OnUpdate(c.old, c.now); !got.Equal(c.want) {
			t.Errorf("%s: trigger %v, want %v", c.name, got, c.want)
		}
	}
}

// Whatever the annotation holds, reading it neither fails nor panics,
// and a time read from it is the time it writes.
func FuzzChangedOf(f *testing.F) {
	for _, s := range []string{"2026-03-01T10:00:03.123456789Z", "2026-03-01T11:00:04+01:00", "", "yesterday",
		"0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "1677-09-21T00:12:43Z", "2262-04-11T23:47:16.854775807Z",
		"2026-02-30T10:00:00Z", "2026-03-01T10:00:00.Z"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, annotation string) {
		m := &metav1.ObjectMeta{Annotations: map[string]string{LastChangeTriggerTime: annotation}}
		changed := ChangedOf(m, true)
		if changed == 0 {
			return
		}
		want, err := time.Parse(time.RFC3339Nano, annotation)
		if err != nil {
			t.Fatalf("%q does not parse, read as %v", annotation, changed.Time())
		}
		if d := want.Sub(changed.Time()); d < 0 || d > time.Nanosecond {
			t.Fatalf("%q read as %v", annotation, changed.Time())
		}
		_ = changed.OnUpdate(0, want)
		_ = changed.OnAdd(false, want)
	})
}
