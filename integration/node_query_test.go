package integration

// Pods that resolve without pause while the replicas change.

import (
	"context"
	"fmt"
	"strings"
	"testing"

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
// answer: "ok NAME" or "FAIL NAME rc=N at TIME output" (the time, to
// set a failure against the replicas' and the node's logs).
type querier struct {
	c       *nodeCluster
	ns, pod string
	seen    int // answers counted at the last wait
	// excused is how many failed answers of the log a phase excused
	// (excuse); the others fail the test.
	excused int
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
  out=$(getent hosts "$1" 2>&1); rc=$?
  case "$out" in "$2 "*) echo "ok $1";; *) echo "FAIL $1 rc=$rc at $(date +%T) $(echo "$out" | tr '\n' '|')";; esac
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
		if len(failed) > q.excused {
			t.Fatalf("%s: %d of %d answers failed, first: %s", phase, len(failed)-q.excused, answers, failed[q.excused])
		}
		if q.seen = answers; answers < want {
			return fmt.Errorf("%s: the querier has %d answers, want %d", phase, answers, want)
		}
		return nil
	})
	t.Logf("%s: %d answers so far, every one right", phase, q.seen)
}

// excuse waits until the querier has given n more answers, then lets up
// to max answers that failed since the last wait pass, logged, for a
// phase whose failures are not shardns's to prevent; more fail t. The
// querier asks one name at a time, so the n answers come after any lookup
// of the phase still waiting.
func (q *querier) excuse(t *testing.T, n, max int, why string) {
	t.Helper()
	want := q.seen + n
	var answers int
	var failed []string
	q.c.eventually(t, podTimeout, func() error {
		if answers, failed = q.count(t); answers < want {
			return fmt.Errorf("%s: the querier has %d answers, want %d", why, answers, want)
		}
		return nil
	})
	failed = failed[q.excused:]
	if len(failed) > max {
		t.Fatalf("%s: %d answers failed, at most %d excused; first: %s", why, len(failed), max, failed[0])
	}
	for _, f := range failed {
		t.Logf("excused (%s): %s", why, f)
	}
	q.excused += len(failed)
	q.seen = answers
}

// finish stops the querier and checks its answers once more.
func (q *querier) finish(t *testing.T) {
	t.Helper()
	answers, failed := q.count(t)
	if len(failed) > q.excused {
		t.Fatalf("%d of %d answers failed, first: %s", len(failed)-q.excused, answers, failed[q.excused])
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
