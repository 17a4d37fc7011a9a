package nodetier

// Pods that resolve without pause while the replicas change.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// queryFixtures creates six namespaces prefix0..prefix5 with a Service
// svc each, so that their names fall in six zones with different owners,
// waits until every pod behind kube-dns (the replicas, and CoreDNS's where
// it runs) answers them, and returns them as a querier asks them:
// name.namespace, through the search path.
func (c *nodeCluster) queryFixtures(t *testing.T, prefix string) []queried {
	t.Helper()
	var names []queried
	var records []record
	for i := range 6 {
		ns := fmt.Sprintf("%s%d", prefix, i)
		c.createNamespace(t, ns)
		svc := c.createService(t, ns, "svc", "http", 80, nil, false)
		names = append(names, queried{"svc." + ns, svc.Spec.ClusterIP})
		records = append(records, record{"svc." + ns + ".svc.cluster.local", dns.TypeA, svc.Spec.ClusterIP})
	}
	c.waitRecordsAt(t, c.dnsPods(t), records)
	return names
}

// queried is a name a querier asks and the address it must get.
type queried struct{ name, address string }

// querier is a busybox pod that resolves names in a loop, one line per
// answer: "ok NAME" or "FAIL NAME rc=N at END from START output" (when
// the lookup ended and began, to set a failure against the replicas' and
// the node's logs, and against the failures before it).
type querier struct {
	c       *nodeCluster
	ns, pod string
	seen    int // answers counted at the last wait
	// Failed lookups before excuseEnd, up to excuseMax, are excused
	// (excuseUntil); excused counts those logged.
	excuseEnd time.Time
	excuseMax int
	excuseWhy string
	excused   int
}

// startQuerier starts a querier in ns and waits until it runs. It asks
// with glibc's getent, which goes through the search path as most
// programs do (name.namespace: first name.namespace.<ns>.svc.cluster.local,
// NXDOMAIN, then name.namespace.svc.cluster.local), each question with
// glibc's own timeout and retry. opts change the pod (its resolv.conf).
func (c *nodeCluster) startQuerier(t *testing.T, ns, name string, names []queried, opts ...podOption) *querier {
	t.Helper()
	// getent prints the address padded with blanks, then the name: the
	// blank after it keeps 10.96.0.1 from matching 10.96.0.10.
	script := `check() {
  from=$(date +%T)
  out=$(getent hosts "$1" 2>&1); rc=$?
  case "$out" in "$2 "*) echo "ok $1";; *) echo "FAIL $1 rc=$rc at $(date +%T) from $from $(echo "$out" | tr '\n' '|')";; esac
}
while true; do
`
	for _, q := range names {
		script += fmt.Sprintf("  check %s %s\n", q.name, q.address)
	}
	script += "done\n"
	c.runPod(t, ns, name, nil, "", "", []string{"sh", "-c", script}, opts...)
	c.waitRunning(t, ns, name)
	return &querier{c: c, ns: ns, pod: name}
}

// count reads the querier's log: answers and the failed ones.
func (q *querier) count(t *testing.T) (answers int, failed []string) {
	t.Helper()
	for _, l := range strings.Split(q.c.logs(t, q.ns, q.pod), "\n") {
		switch {
		case strings.HasPrefix(l, "ok "):
			answers++
		case strings.HasPrefix(l, "FAIL "):
			answers++
			failed = append(failed, l)
		}
	}
	return answers, failed
}

// waitAnswers waits until the querier has given n more answers, so that a
// phase of the test is covered by queries, and fails t at the first
// failed answer.
func (q *querier) waitAnswers(t *testing.T, n int, phase string) {
	t.Helper()
	want := q.seen + n
	q.c.eventually(t, podTimeout, func() error {
		answers, failed := q.count(t)
		if failed = q.unexcused(t, failed); len(failed) > 0 {
			q.c.explainFailure(t)
			t.Fatalf("%s: %d of %d answers failed, first: %s", phase, len(failed), answers, failed[0])
		}
		if q.seen = answers; answers < want {
			return fmt.Errorf("%s: the querier has %d answers, want %d", phase, answers, want)
		}
		return nil
	})
	t.Logf("%s: %d answers so far, every one right", phase, q.seen)
}

// excuseUntil lets the lookups of up to max incidents that fail before
// end (by the time on their FAIL line) pass, for a phase whose failures
// are not shardns's to prevent; each is logged when seen. A lookup that
// began within incidentSpan of the end of the failed one before it is
// of the same incident: a pod's network going away fails every lookup in
// flight through it, and one that waits out the resolver's timeout (5 s)
// ends seconds after the first. Lookups failing later, or in more than
// max incidents, fail t as usual.
func (q *querier) excuseUntil(end time.Time, max int, why string) {
	q.excuseEnd, q.excuseMax, q.excuseWhy = end, max, why
}

// unexcused drops from failed the lookups excuseUntil lets pass, and
// logs those the first time.
func (q *querier) unexcused(t *testing.T, failed []string) []string {
	t.Helper()
	var left []string
	excused, incidents := 0, 0
	var last time.Time
	for _, f := range failed {
		at, ok := failedAt(f, q.excuseEnd)
		if !ok || at.After(q.excuseEnd) {
			left = append(left, f)
			continue
		}
		if incidents == 0 || startedAt(f, at).Sub(last) > incidentSpan {
			incidents++
		}
		if incidents > q.excuseMax {
			left = append(left, f)
			continue
		}
		last = at
		if excused++; excused > q.excused {
			q.excused = excused
			t.Logf("excused (%s): %s", q.excuseWhy, f)
		}
	}
	return left
}

// incidentSpan is how soon after a failed lookup the next one must begin
// to count in the same incident: FAIL lines carry times to the second.
const incidentSpan = 2 * time.Second

// failedAt reads the time of day a FAIL line says its lookup ended ("at
// 15:04:05"), as the time of that day nearest to near.
func failedAt(line string, near time.Time) (time.Time, bool) {
	return timeAfter(line, " at ", near)
}

// startedAt reads the time of day a FAIL line says its lookup began
// ("from 15:04:05"), as the time of that day nearest to its end; end
// itself when the line does not say.
func startedAt(line string, end time.Time) time.Time {
	if from, ok := timeAfter(line, " from ", end); ok {
		return from
	}
	return end
}

// timeAfter reads the time of day that follows marker in line, as the
// time of that day nearest to near.
func timeAfter(line, marker string, near time.Time) (time.Time, bool) {
	_, rest, ok := strings.Cut(line, marker)
	if !ok || len(rest) < 8 {
		return time.Time{}, false
	}
	clock, err := time.Parse("15:04:05", rest[:8])
	if err != nil {
		return time.Time{}, false
	}
	near = near.UTC()
	at := time.Date(near.Year(), near.Month(), near.Day(), clock.Hour(), clock.Minute(), clock.Second(), 0, time.UTC)
	switch {
	case at.Sub(near) > 12*time.Hour:
		at = at.AddDate(0, 0, -1)
	case near.Sub(at) > 12*time.Hour:
		at = at.AddDate(0, 0, 1)
	}
	return at, true
}

// finish stops the querier and checks its answers once more.
func (q *querier) finish(t *testing.T) {
	t.Helper()
	answers, failed := q.count(t)
	if failed = q.unexcused(t, failed); len(failed) > 0 {
		q.c.explainFailure(t)
		t.Fatalf("%d of %d answers failed, first: %s", len(failed), answers, failed[0])
	}
	zero := int64(0)
	q.c.client().CoreV1().Pods(q.ns).Delete(context.Background(), q.pod, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	t.Logf("%d answers, every one right", answers)
}

// scale sets the StatefulSet's replicas through its scale subresource,
// as `kubectl scale statefulset shardns` does.
func (c *nodeCluster) scale(t *testing.T, replicas int32) {
	t.Helper()
	ctx := context.Background()
	c.eventually(t, podTimeout, func() error {
		s, err := c.client().AppsV1().StatefulSets("kube-system").GetScale(ctx, "shardns", metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = replicas
		_, err = c.client().AppsV1().StatefulSets("kube-system").UpdateScale(ctx, "shardns", s, metav1.UpdateOptions{})
		return err // a conflict with the controller's status update is retried
	})
	t.Logf("scaled to %d replicas", replicas)
}

// A lookup that waited out the resolver's timeout after another failed is
// of that one's incident, however late it ends; one that began after
// lookups went through again is an incident of its own.
func TestQuerierCountsIncidentsByWhenLookupsBegan(t *testing.T) {
	end := time.Date(2026, 11, 28, 5, 6, 40, 0, time.UTC)
	q := &querier{excuseEnd: end, excuseMax: 1, excuseWhy: "test"}
	inFlight := []string{
		"FAIL svc.repl4 rc=2 at 05:06:29 from 05:06:19 |",
		"FAIL svc.repl5 rc=2 at 05:06:34 from 05:06:29 |",
	}
	if left := q.unexcused(t, inFlight); len(left) != 0 {
		t.Errorf("a lookup in flight through the first failure is of its incident: %v left", left)
	}
	later := append(inFlight, "FAIL svc.repl0 rc=2 at 05:06:38 from 05:06:37 |")
	if left := q.unexcused(t, later); len(left) != 1 || left[0] != later[2] {
		t.Errorf("a lookup begun 3 s after the last failure is a second incident: %v left", left)
	}
	after := []string{"FAIL svc.repl0 rc=2 at 05:06:41 from 05:06:41 |"}
	if left := q.unexcused(t, after); len(left) != 1 {
		t.Errorf("a failure after the window is excused: %v left", left)
	}
	old := []string{"FAIL svc.repl4 rc=2 at 05:06:29 |", "FAIL svc.repl5 rc=2 at 05:06:34 |"}
	if left := q.unexcused(t, old); len(left) != 1 {
		t.Errorf("lines without a start: failures 5 s apart are two incidents, %v left", left)
	}
}
