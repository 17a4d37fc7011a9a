package cluster

import (
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// cohChange is one change made through the API: the name it changes, the
// state every server answers before it, and the call that makes it.
type cohChange struct {
	kind  string
	ns    string                 // the namespace, whose zone's owner answers it
	name  string                 // asked for its A records
	old   string                 // as stateOf renders it
	apply func() (string, error) // makes the change; the new state
}

// cohSample is how long a server took to answer a change's new state.
type cohSample struct {
	kind, tier, server string
	took               time.Duration
	seen               bool   // false: still stale at coherenceGiveUp
	stale              string // the last other state it answered
}

// prepare creates the objects of repetition rep's three changes, each
// kind in its own namespace, with names no server was asked before.
func (c *coherenceTest) prepare(t *testing.T, rep int) []cohChange {
	t.Helper()
	suffix := fmt.Sprintf("p%d-r%d", c.phase, rep)
	return []cohChange{
		c.newService(c.nss[0], "new-"+suffix),
		c.endpointReplaced(t, c.nss[1], "db-"+suffix, fmt.Sprintf("10.244.%d.%d", 100+c.phase, 2*rep+1)),
		c.serviceDeleted(t, c.nss[2], "gone-"+suffix),
	}
}

// newService is the creation of a ClusterIP Service, NXDOMAIN before.
func (c *coherenceTest) newService(ns, name string) cohChange {
	svc := harness.ClusterIPService(ns, name)
	return cohChange{kind: "new service", ns: ns, name: serviceName(ns, name), old: "NXDOMAIN",
		apply: func() (string, error) {
			created, err := c.cp.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
			if err != nil {
				return "", err
			}
			return "NOERROR " + created.Spec.ClusterIP, nil
		}}
}

// endpointReplaced creates a headless Service whose one endpoint has the
// address oldIP; the change gives it the next address instead.
func (c *coherenceTest) endpointReplaced(t *testing.T, ns, name, oldIP string) cohChange {
	t.Helper()
	harness.CreateService(t, c.cp.Client, harness.HeadlessService(ns, name))
	slice := harness.CreateEndpointSlice(t, c.cp.Client, ns, name, name+"-v4", discoveryv1.AddressTypeIPv4, harness.Endpoint{IP: oldIP})
	ip := net.ParseIP(oldIP).To4()
	ip[3]++
	newIP := ip.String()
	return cohChange{kind: "endpoint replaced", ns: ns, name: serviceName(ns, name), old: "NOERROR " + oldIP,
		apply: func() (string, error) {
			slice.Endpoints[0].Addresses = []string{newIP}
			_, err := c.cp.Client.DiscoveryV1().EndpointSlices(ns).Update(ctx, slice, metav1.UpdateOptions{})
			return "NOERROR " + newIP, err
		}}
}

// serviceDeleted creates a ClusterIP Service; the change deletes it.
func (c *coherenceTest) serviceDeleted(t *testing.T, ns, name string) cohChange {
	t.Helper()
	svc := harness.CreateService(t, c.cp.Client, harness.ClusterIPService(ns, name))
	return cohChange{kind: "service deleted", ns: ns, name: serviceName(ns, name), old: "NOERROR " + svc.Spec.ClusterIP,
		apply: func() (string, error) {
			return "NXDOMAIN", c.cp.Client.CoreV1().Services(ns).Delete(ctx, name, metav1.DeleteOptions{})
		}}
}

func serviceName(ns, name string) string { return name + "." + ns + ".svc.cluster.local." }

// prime waits until each change's owner answers the old state, then asks
// every server twice for it: each caches the owner's answer, and none
// caches a state from before the objects were complete.
func (c *coherenceTest) prime(t *testing.T, servers []cohServer, changes []cohChange) {
	t.Helper()
	for _, ch := range changes {
		owner := c.byName[c.owners[ch.ns]].Addr
		testutil.Eventually(t, 10*time.Second, func() error { return isState(owner, ch.name, ch.old) })
		for _, s := range servers {
			for range 2 {
				if err := isState(s.addr, ch.name, ch.old); err != nil {
					t.Fatalf("%s before the change: %v", s.name, err)
				}
			}
		}
	}
}

// spreadAll makes the changes at once and measures how long each server
// took to answer each one's new state. At once, so that a round whose
// caches are timed lasts one TTL, not three.
func (c *coherenceTest) spreadAll(t *testing.T, servers []cohServer, changes []cohChange) []cohSample {
	t.Helper()
	samples := make([][]cohSample, len(changes))
	errs := make([]error, len(changes))
	var wg sync.WaitGroup
	for i, ch := range changes {
		wg.Go(func() { samples[i], errs[i] = c.spread(servers, ch) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s %s: %v", changes[i].kind, changes[i].name, err)
		}
	}
	return slices.Concat(samples...)
}

// spread makes ch and asks every server every coherencePoll from the
// moment the API call returns until it answers the new state.
func (c *coherenceTest) spread(servers []cohServer, ch cohChange) ([]cohSample, error) {
	want, err := ch.apply()
	if err != nil {
		return nil, err
	}
	applied := time.Now()
	out := make([]cohSample, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() {
			out[i] = cohSample{kind: ch.kind, tier: c.tier(s, ch.ns), server: s.name}
			out[i].took, out[i].seen, out[i].stale = pollState(s.addr, ch.name, want, applied)
		})
	}
	wg.Wait()
	return out, nil
}

// pollState asks addr for name every coherencePoll until it answers
// want, and returns how long after from that was, or gives up after
// coherenceGiveUp; stale is the last other answer.
func pollState(addr, name, want string, from time.Time) (took time.Duration, seen bool, stale string) {
	tick := time.NewTicker(coherencePoll)
	defer tick.Stop()
	for {
		got := stateOf(addr, name)
		took = time.Since(from)
		if got == want {
			return took, true, stale
		}
		stale = got
		if took > coherenceGiveUp {
			return took, false, stale
		}
		<-tick.C
	}
}

// stateOf renders addr's answer to name's A question as its rcode and
// sorted addresses ("NOERROR 10.96.0.12", "NXDOMAIN"). A question gets
// 250 ms: a lost datagram costs a poll or so, not a stub's 2 s retry.
func stateOf(addr, name string) string {
	client := &dns.Client{Timeout: 250 * time.Millisecond}
	r, _, err := client.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), addr)
	if err != nil {
		return "error: " + err.Error()
	}
	state := []string{dns.RcodeToString[r.Rcode]}
	var ips []string
	for _, rr := range r.Answer {
		if a, ok := rr.(*dns.A); ok {
			ips = append(ips, a.A.String())
		}
	}
	slices.Sort(ips)
	return strings.Join(append(state, ips...), " ")
}

func isState(addr, name, want string) error {
	if got := stateOf(addr, name); got != want {
		return fmt.Errorf("%s from %s: %q, want %q", name, addr, got, want)
	}
	return nil
}

// logCoherence logs the median and worst time to the new state per kind
// of change and tier, in milliseconds.
func logCoherence(t *testing.T, samples []cohSample) {
	t.Helper()
	type group struct{ kind, tier string }
	took := map[group][]float64{}
	stale := map[group]int{}
	for _, s := range samples {
		g := group{s.kind, s.tier}
		took[g] = append(took[g], harness.Millis(s.took))
		if !s.seen || s.took > coherenceBound {
			stale[g]++
		}
	}
	lines := []string{fmt.Sprintf("%-18s %-10s %4s %10s %10s %s", "change", "tier", "n", "median ms", "worst ms", "over "+coherenceBound.String())}
	for _, kind := range []string{"new service", "endpoint replaced", "service deleted"} {
		for _, tier := range []string{"owner", "replica", "nodelocal"} {
			g := group{kind, tier}
			if v := took[g]; len(v) > 0 {
				lines = append(lines, fmt.Sprintf("%-18s %-10s %4d %10.0f %10.0f %d",
					kind, tier, len(v), harness.Median(v), slices.Max(v), stale[g]))
			}
		}
	}
	t.Logf("time from the API call's return to the new answer:\n%s", strings.Join(lines, "\n"))
}

// checkProgrammingMetric wants the owner of a namespace changed to have
// observed how long its changes took to reach its own answers (tier
// owner), and a replica that does not own it how long they took to
// reach its cache (tier replica).
func (c *coherenceTest) checkProgrammingMetric(t *testing.T) {
	ns := c.nss[2]
	owner := c.owners[ns]
	other := c.names[0]
	if other == owner {
		other = c.names[1]
	}
	m := harness.MustMetrics(t, c.byName[other].HTTP)
	if !slices.ContainsFunc(slices.Collect(maps.Keys(m)), func(k string) bool { return strings.HasPrefix(k, programmingMetric) }) {
		t.Fatalf("%s's /metrics has no %s: how long changes take to reach each tier is not reported (yet)", other, programmingMetric)
	}
	if n := m.SumWith(programmingMetric+"_count", `tier="replica"`); n == 0 {
		t.Errorf("%s (no owner of %s) observed no %s{tier=\"replica\"}:\n%s", other, ns, programmingMetric, m.Series(programmingMetric+"_count"))
	}
	om := harness.MustMetrics(t, c.byName[owner].HTTP)
	if n := om.SumWith(programmingMetric+"_count", `tier="owner"`); n == 0 {
		t.Errorf("%s (owner of %s) observed no %s{tier=\"owner\"}:\n%s", owner, ns, programmingMetric, om.Series(programmingMetric+"_count"))
	}
}
