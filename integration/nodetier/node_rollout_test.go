package nodetier

// Zero-loss rollouts of the node-local cache on the real node: the
// DaemonSet of deploy/components/nodelocal restarted as `kubectl rollout
// restart daemonset` restarts it, under a pod that has no other
// nameserver.

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/shardns/shardns/integration/harness"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// rollouts is how many `kubectl rollout restart` in a row.
const rollouts = 3

// testNodeLocalRollouts restarts the node-local DaemonSet rollouts times
// while a pod of ns, whose resolv.conf lists linkLocal alone, resolves
// names from ten loops at once (eight gave 188 lookups a second on the
// 2-core test machine): every lookup must succeed, none excused, and each restart must
// end with a new pod ready that serves the pod's lookups itself.
func (c *nodeCluster) testNodeLocalRollouts(t *testing.T, ns string, names []queried, linkLocal, metricsPort string) {
	dnsConfig := &corev1.PodDNSConfig{
		Nameservers: []string{linkLocal},
		Searches:    []string{ns + ".svc.cluster.local", "svc.cluster.local", "cluster.local"},
		Options:     []corev1.PodDNSConfigOption{{Name: "ndots", Value: harness.Ptr("5")}},
	}
	q := c.startQuerierLoops(t, ns, "nlrollout", names, 10, withDNSConfig(dnsConfig))
	q.waitAnswers(t, 2*len(names), "before the rollouts, 169.254.20.10 alone")
	start, before := time.Now(), q.seen
	for i := range rollouts {
		pod := c.waitNodeLocal(t, "")
		c.rolloutRestart(t)
		began := time.Now()
		next := c.waitNodeLocal(t, pod.UID)
		t.Logf("rollout %d: %s replaced by %s, ready and alone after %v", i+1, pod.Name, next.Name, time.Since(began).Round(time.Second))
		q.waitAnswers(t, 2*len(names), fmt.Sprintf("rollout %d, 169.254.20.10 alone", i+1))
		c.waitNodeLocalRing(t, net.JoinHostPort(next.Status.PodIP, metricsPort), next.Status.PodIP)
	}
	t.Logf("%d rollouts: %d lookups in %v (%.0f a second) through 169.254.20.10 alone, none failed",
		rollouts, q.seen-before, time.Since(start).Round(time.Second), float64(q.seen-before)/time.Since(start).Seconds())
	q.finish(t)
}

// rolloutRestart does what `kubectl rollout restart daemonset
// shardns-nodelocal -n kube-system` does: it stamps the pod template,
// which the DaemonSet controller rolls out by its updateStrategy.
func (c *nodeCluster) rolloutRestart(t *testing.T) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`,
		time.Now().Format(time.RFC3339Nano))
	_, err := c.client().AppsV1().DaemonSets("kube-system").Patch(context.Background(), "shardns-nodelocal",
		types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// startQuerierLoops is startQuerier with loops lookup loops running at
// once in the pod, for a steady rate of lookups a single loop of
// getent processes does not reach.
func (c *nodeCluster) startQuerierLoops(t *testing.T, ns, name string, names []queried, loops int, opts ...podOption) *querier {
	t.Helper()
	script := `check() {
  from=$(date +%T)
  out=$(getent hosts "$1" 2>&1); rc=$?
  case "$out" in "$2 "*) echo "ok $1";; *) echo "FAIL $1 rc=$rc at $(date +%T) from $from $(echo "$out" | tr '\n' '|')";; esac
}
loop() {
  while true; do
`
	for _, q := range names {
		script += fmt.Sprintf("    check %s %s\n", q.name, q.address)
	}
	script += fmt.Sprintf("  done\n}\nfor i in $(seq %d); do loop & done\nwait\n", loops)
	c.runPod(t, ns, name, nil, "", "", []string{"sh", "-c", script}, opts...)
	c.waitRunning(t, ns, name)
	return &querier{c: c, ns: ns, pod: name}
}
